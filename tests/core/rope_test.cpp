// RoPE: rotations keep norms, position 0 is the identity, scores depend only on relative
// position, the two layouts rotate the pairs they name, linear scaling divides positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rope_run.h"
#include "test_data.h"
#include "veloxquant/error.h"
#include "veloxquant/rope.h"

namespace veloxquant {
namespace {

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

std::vector<float> rotated(std::vector<float> x, const RopeParams& p, int64_t pos) {
  apply_rope(p, x.data(), 1, x.size(), pos);
  return x;
}

TEST(Rope, PositionZeroIsIdentityAndNormsAreKept) {
  for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::Neox}) {
    const RopeParams p{64, 10000.0f, 1.0f, layout};
    const auto x = test::gaussian(64, 1);
    EXPECT_EQ(rotated(x, p, 0), x);
    const auto y = rotated(x, p, 12345);
    EXPECT_NEAR(dot(y, y), dot(x, x), 1e-4 * dot(x, x));
  }
}

TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::Neox}) {
    const RopeParams p{32, 500000.0f, 1.0f, layout};
    const auto q = test::gaussian(32, 2), k = test::gaussian(32, 3);
    const double s1 = dot(rotated(q, p, 100), rotated(k, p, 93));
    const double s2 = dot(rotated(q, p, 7007), rotated(k, p, 7000));
    EXPECT_NEAR(s1, s2, 1e-4 * std::abs(s1) + 1e-5);
  }
}

TEST(Rope, LayoutsRotateTheirPairs) {
  // The first pair turns by exactly pos radians: interleaved rotates (0, 1),
  // NeoX rotates (0, dims/2).
  std::vector<float> x(8, 0.0f);
  x[0] = 1.0f;
  const auto a = rotated(x, RopeParams{8, 10000.0f, 1.0f, RopeLayout::Interleaved}, 1);
  EXPECT_NEAR(a[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(a[1], std::sin(1.0), 1e-6);
  EXPECT_EQ(a[4], 0.0f);
  const auto b = rotated(x, RopeParams{8, 10000.0f, 1.0f, RopeLayout::Neox}, 1);
  EXPECT_NEAR(b[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(b[4], std::sin(1.0), 1e-6);
  EXPECT_EQ(b[1], 0.0f);
}

TEST(Rope, PartialRotationLeavesTheRestAndLinearScalingDividesPositions) {
  const auto x = test::gaussian(16, 4);
  const auto y = rotated(x, RopeParams{8, 10000.0f, 1.0f, RopeLayout::Neox}, 9);
  for (size_t i = 8; i < 16; ++i) EXPECT_EQ(y[i], x[i]);
  const auto scaled = rotated(x, RopeParams{16, 10000.0f, 0.25f, RopeLayout::Interleaved}, 40);
  const auto plain = rotated(x, RopeParams{16, 10000.0f, 1.0f, RopeLayout::Interleaved}, 10);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(scaled[i], plain[i], 1e-5);
}

TEST(Rope, RejectsDimsItCannotRotate) {
  std::vector<float> x(8);
  EXPECT_THROW(apply_rope(RopeParams{7, 10000.0f, 1.0f, RopeLayout::Neox}, x.data(), 1, 8, 0), Error);
  EXPECT_THROW(apply_rope(RopeParams{16, 10000.0f, 1.0f, RopeLayout::Neox}, x.data(), 1, 8, 0), Error);
}

}  // namespace
}  // namespace veloxquant

namespace veloxquant {
namespace {

// A run of consecutive positions (the angle-addition recurrence, re-seeded every 256) rotates
// each vector as apply_rope does at its own position, far out too, in both layouts and with a
// partial rotary dimension.
TEST(Rope, ARunOfPositionsMatchesRotatingEachVector) {
  const size_t d = 64, n = 1000;
  for (RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::Neox}) {
    for (const uint32_t dims : {64u, 32u}) {
      const RopeParams p{dims, 10000.0f, 1.0f, layout};
      for (const int64_t first : {int64_t{0}, int64_t{123456}}) {
        const std::vector<float> x = test::gaussian(n * d, 7);
        std::vector<float> run = x;
        apply_rope_run(p, run.data(), n, d, first);
        double worst = 0;
        for (size_t j = 0; j < n; ++j) {
          const std::vector<float> one = rotated({x.begin() + static_cast<std::ptrdiff_t>(j * d),
                                                  x.begin() + static_cast<std::ptrdiff_t>((j + 1) * d)}, p, first + static_cast<int64_t>(j));
          for (size_t c = 0; c < d; ++c) worst = std::max(worst, std::fabs(static_cast<double>(one[c]) - run[j * d + c]));
        }
        EXPECT_LT(worst, 1e-5) << "dims " << dims << " first " << first;
      }
    }
  }
  std::vector<float> x(3 * d, 1.0f);
  EXPECT_THROW(apply_rope_run(RopeParams{65, 10000.0f, 1.0f, RopeLayout::Interleaved}, x.data(), 3, d, 0), Error);
}

}  // namespace
}  // namespace veloxquant
