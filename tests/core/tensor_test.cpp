#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

TEST(Tensor, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Tensor, HalfRoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between 1 and 1 + 2^-10: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3 * 2^-11 lies between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway to the next binade rounds to inf
  EXPECT_EQ(f32_to_f16(-1e9f), 0xfc00);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // half of the smallest subnormal: tie to even (0)
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002);
}

TEST(Tensor, BfloatRoundTripAndRounding) {
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie to even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
}

TEST(Tensor, BulkConversionMatchesScalar) {
  std::vector<uint16_t> h(1000);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 61 + 3);
  std::vector<float> f(h.size());
  f16_to_f32(h.data(), f.data(), h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const float ref = f16_to_f32(h[i]);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(f[i]));
    } else {
      EXPECT_EQ(f[i], ref);
    }
  }
}

TEST(Tensor, BulkHalfEncodingMatchesScalarBitForBit) {
  // Ties at every binade, subnormals, values near the overflow threshold, and random bit patterns.
  std::vector<float> x;
  for (int e = -26; e <= 16; ++e) {
    const float base = std::ldexp(1.0f, e);
    for (int m = 0; m < 8; ++m) x.push_back(base * (1.0f + static_cast<float>(m) / 2048.0f + 1.0f / 4096.0f));
    x.push_back(-base);
  }
  for (float v : {65504.0f, 65519.0f, 65520.0f, 70000.0f, 0.0f, -0.0f}) x.push_back(v);
  uint32_t bits = 12345;
  for (int i = 0; i < 20000; ++i) {
    bits = bits * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>(bits);
    if (std::isfinite(f)) x.push_back(f);
  }
  std::vector<uint16_t> h(x.size());
  f32_to_f16(x.data(), h.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], f32_to_f16(x[i])) << x[i];
}

TEST(Tensor, CheckedConversionRejectsNonFinite) {
  const float data[4] = {1, 2, std::numeric_limits<float>::quiet_NaN(), 4};
  EXPECT_THROW(to_f32_checked(TensorView::f32(data, {2, 2}), "keys"), ShapeError);
  const float inf[2] = {1, std::numeric_limits<float>::infinity()};
  EXPECT_THROW(to_f32_checked(TensorView::f32(inf, {2}), "keys"), ShapeError);
  EXPECT_EQ(to_f32_checked(TensorView::f32(data, {2}), "keys").size(), 2u);
}

TEST(Tensor, ShapeString) {
  const uint16_t d[6] = {};
  EXPECT_EQ(TensorView::f16(d, {1, 2, 3}).shape_string(), "[1, 2, 3] f16");
  EXPECT_THROW(TensorView::f16(d, {1, 1, 1, 1, 1}), ShapeError);
}

}  // namespace
}  // namespace veloxquant
