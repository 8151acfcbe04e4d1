#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "core/rotation.h"
#include "veloxquant/error.h"
#include "test_data.h"

namespace veloxquant {
namespace {

using test::gaussian;

TEST(Rotation, PowerOfTwo) {
  EXPECT_FALSE(is_power_of_two(0));
  EXPECT_TRUE(is_power_of_two(1));
  EXPECT_TRUE(is_power_of_two(2));
  EXPECT_TRUE(is_power_of_two(128));
  EXPECT_FALSE(is_power_of_two(96));
  EXPECT_FALSE(is_power_of_two(3));
  EXPECT_TRUE(is_power_of_two(size_t{1} << 40));
}

TEST(Rotation, FwhtMatchesHadamardMatrix) {
  for (size_t n : {1u, 2u, 4u, 8u, 32u, 128u}) {
    const auto x = gaussian(n, n);
    std::vector<float> y = x;
    fwht(y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      double ref = 0;
      for (size_t j = 0; j < n; ++j) ref += ((std::popcount(i & j) % 2) ? -1.0 : 1.0) * x[j];
      ref /= std::sqrt(static_cast<double>(n));
      ASSERT_NEAR(y[i], ref, 1e-5 * std::sqrt(double(n))) << "n=" << n << " i=" << i;
    }
  }
  // Hand-computed: H2 [3, 1] / sqrt(2) = [4, 2] / sqrt(2).
  float v[2] = {3, 1};
  fwht(v, 2);
  EXPECT_NEAR(v[0], 4 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(v[1], 2 / std::sqrt(2.0), 1e-6);
}

TEST(Rotation, FwhtPreservesNormAndIsSelfInverse) {
  for (size_t n : {2u, 16u, 64u, 128u, 256u}) {
    const auto x = gaussian(n, 100 + n);
    std::vector<float> y = x;
    fwht(y.data(), n);
    const double nx = test::dot(x.data(), x.data(), n), ny = test::dot(y.data(), y.data(), n);
    EXPECT_NEAR(ny, nx, 1e-5 * nx) << "n=" << n;
    fwht(y.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << "n=" << n << " i=" << i;
  }
}

class RotationDims : public ::testing::TestWithParam<size_t> {};

TEST_P(RotationDims, RoundTripAndDotProducts) {
  const size_t d = GetParam();
  const Rotation rot(d, 17);
  EXPECT_EQ(rot.dim(), d);
  EXPECT_EQ(rot.is_hadamard(), is_power_of_two(d));
  const size_t rows = 8;
  const auto x = gaussian(rows * d, 1000 + d);
  std::vector<float> y = x;
  rot.forward(y.data(), rows);
  // The rotation actually moves vectors.
  double moved = 0;
  for (size_t i = 0; i < d; ++i) moved += std::abs(y[i] - x[i]);
  if (d >= 8) {
    EXPECT_GT(moved, 0.1 * static_cast<double>(d));
  }
  // Dot products (and norms) preserved between every pair of rows.
  for (size_t a = 0; a < rows; ++a)
    for (size_t b = 0; b < rows; ++b) {
      const double before = test::dot(x.data() + a * d, x.data() + b * d, d);
      const double after = test::dot(y.data() + a * d, y.data() + b * d, d);
      EXPECT_NEAR(after, before, 1e-5 * static_cast<double>(d)) << "d=" << d << " " << a << "," << b;
    }
  // Multi-row forward equals one row at a time.
  for (size_t r = 0; r < rows; ++r) {
    std::vector<float> one(x.begin() + static_cast<long>(r * d), x.begin() + static_cast<long>((r + 1) * d));
    rot.forward(one.data());
    for (size_t i = 0; i < d; ++i) ASSERT_EQ(one[i], y[r * d + i]);
  }
  rot.inverse(y.data(), rows);
  for (size_t i = 0; i < rows * d; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << "d=" << d << " i=" << i;
  // inverse then forward also round-trips.
  std::vector<float> z = x;
  rot.inverse(z.data(), rows);
  rot.forward(z.data(), rows);
  for (size_t i = 0; i < rows * d; ++i) ASSERT_NEAR(z[i], x[i], 1e-5) << "d=" << d << " i=" << i;
}

TEST_P(RotationDims, SameSeedSameRotationDifferentSeedDiffers) {
  const size_t d = GetParam();
  const auto x = gaussian(d, 5);
  std::vector<float> a = x, b = x, c = x;
  Rotation(d, 42).forward(a.data());
  Rotation(d, 42).forward(b.data());
  Rotation(d, 43).forward(c.data());
  EXPECT_EQ(a, b);
  if (d > 1) {  // d = 1 is a single sign: two seeds agree half the time
    EXPECT_NE(a, c);
  }
}

TEST_P(RotationDims, ColumnsAreOrthonormal) {
  // Rotating the standard basis gives the columns of the matrix: check R^T R = I.
  const size_t d = GetParam();
  const Rotation rot(d, 3);
  std::vector<float> cols(d * d, 0.0f);
  for (size_t i = 0; i < d; ++i) cols[i * d + i] = 1.0f;
  rot.forward(cols.data(), d);
  double worst = 0;
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j) {
      const double g = test::dot(cols.data() + i * d, cols.data() + j * d, d);
      worst = std::max(worst, std::abs(g - (i == j ? 1.0 : 0.0)));
    }
  EXPECT_LT(worst, 1e-5) << "d=" << d;
  if (rot.is_hadamard()) {
    // H D: every entry is +-1/sqrt(d).
    for (float v : cols) ASSERT_NEAR(std::abs(v), 1 / std::sqrt(static_cast<double>(d)), 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Dims, RotationDims, ::testing::Values(1, 2, 3, 64, 96, 100, 128));

TEST(Rotation, StateBytes) {
  EXPECT_EQ(Rotation(128, 0).state_bytes(), 16u);   // one sign bit per coordinate
  EXPECT_EQ(Rotation(64, 0).state_bytes(), 8u);
  EXPECT_EQ(Rotation(4, 0).state_bytes(), 1u);
  EXPECT_EQ(Rotation(1, 0).state_bytes(), 1u);
  EXPECT_EQ(Rotation(96, 0).state_bytes(), 96u * 96u * 4u);  // dense f32 matrix
  EXPECT_EQ(Rotation(3, 0).state_bytes(), 36u);
}

TEST(Rotation, ZeroDimensionThrows) { EXPECT_THROW(Rotation(0, 1), Error); }

TEST(RandomOrthogonal, IsOrthogonalAndDeterministic) {
  for (size_t d : {1u, 5u, 32u, 96u}) {
    const auto q = random_orthogonal(d, 11);
    ASSERT_EQ(q.size(), d * d);
    double worst_qtq = 0, worst_qqt = 0;
    for (size_t i = 0; i < d; ++i)
      for (size_t j = 0; j < d; ++j) {
        double qtq = 0, qqt = 0;
        for (size_t k = 0; k < d; ++k) {
          qtq += static_cast<double>(q[k * d + i]) * q[k * d + j];
          qqt += static_cast<double>(q[i * d + k]) * q[j * d + k];
        }
        const double id = i == j ? 1.0 : 0.0;
        worst_qtq = std::max(worst_qtq, std::abs(qtq - id));
        worst_qqt = std::max(worst_qqt, std::abs(qqt - id));
      }
    EXPECT_LT(worst_qtq, 1e-5) << "d=" << d;
    EXPECT_LT(worst_qqt, 1e-5) << "d=" << d;
    EXPECT_EQ(q, random_orthogonal(d, 11));
    if (d > 1) {
      EXPECT_NE(q, random_orthogonal(d, 12));
    }
  }
}

TEST(RandomOrthogonal, DiagonalIsUnbiased) {
  // Haar measure: E[Q_ij] = 0 and E[Q_ij^2] = 1/d for every entry. Plain Householder QR without
  // the sign fix makes Q_00 = -|g_00| / |g_0| always negative, which this catches.
  const size_t d = 8, seeds = 400;
  double sum00 = 0, sumsq = 0, sumdiag = 0;
  for (size_t s = 0; s < seeds; ++s) {
    const auto q = random_orthogonal(d, 1000 + s);
    sum00 += q[0];
    sumsq += static_cast<double>(q[0]) * q[0];
    for (size_t i = 0; i < d; ++i) sumdiag += q[i * d + i];
  }
  const double se00 = std::sqrt(1.0 / d / seeds);
  EXPECT_NEAR(sum00 / seeds, 0.0, 5 * se00);
  EXPECT_NEAR(sumdiag / (seeds * d), 0.0, 5 * std::sqrt(1.0 / d / (seeds * d)));
  // E[Q_00^2] = 1/d; Q_00^2 ~ Beta(1/2, (d-1)/2) with variance 2(d-1)/(d^2 (d+2)).
  EXPECT_NEAR(sumsq / seeds, 1.0 / d,
              5 * std::sqrt(2.0 * (d - 1) / (d * d * (d + 2.0)) / seeds));
}

}  // namespace
}  // namespace veloxquant
