#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "core/simd.h"
#include "veloxquant/tensor.h"
#include "test_data.h"

namespace veloxquant {
namespace {

const size_t kDims[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 64, 100, 128, 131};

using test::gaussian;

std::vector<uint16_t> halves(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_f16(x[i]);
  return h;
}

// Tolerance for a float sum of n products of unit-scale values, vs a double reference.
double tol(size_t n) { return 1e-5 * (1.0 + static_cast<double>(n)); }

TEST(Simd, DotMatchesScalar) {
  for (size_t n : kDims) {
    const auto a = gaussian(n, n), b = gaussian(n, n + 1000);
    double ref = 0;
    for (size_t i = 0; i < n; ++i) ref += static_cast<double>(a[i]) * b[i];
    EXPECT_NEAR(simd::dot(a.data(), b.data(), n), ref, tol(n)) << "n=" << n;
  }
  EXPECT_EQ(simd::dot(nullptr, nullptr, 0), 0.0f);
  // Exact small-integer case: every partial sum is representable.
  std::vector<float> a(100), b(100);
  for (size_t i = 0; i < 100; ++i) {
    a[i] = static_cast<float>(i % 7) - 3;
    b[i] = static_cast<float>(i % 5) - 2;
  }
  double ref = 0;
  for (size_t i = 0; i < 100; ++i) ref += a[i] * b[i];
  EXPECT_EQ(simd::dot(a.data(), b.data(), 100), static_cast<float>(ref));
}

TEST(Simd, AxpyMatchesScalarAndTouchesOnlyN) {
  for (size_t n : kDims) {
    const auto x = gaussian(n, 3 * n);
    auto y = gaussian(n + 4, 3 * n + 1);
    const auto y0 = y;
    const float a = -0.75f;
    simd::axpy(a, x.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(y[i], y0[i] + static_cast<double>(a) * x[i], 1e-6) << "n=" << n << " i=" << i;
    }
    for (size_t i = n; i < n + 4; ++i) ASSERT_EQ(y[i], y0[i]) << "axpy wrote past n=" << n;
  }
}

struct RowsCase {
  size_t nq, n, dim;
};

std::vector<RowsCase> row_cases() {
  std::vector<RowsCase> out;
  for (size_t dim : kDims)
    for (size_t nq = 1; nq <= 6; ++nq) out.push_back({nq, 1 + (dim + nq) % 9, dim});
  // Enough rows for whole row blocks, a partial one and several 64-row chunks of the kernels.
  for (size_t dim : {8UL, 80UL, 128UL})
    for (size_t nq = 1; nq <= 5; ++nq) out.push_back({nq, 141 + nq, dim});
  return out;
}

TEST(Simd, DotRowsF16AndF32MatchScalar) {
  for (const auto& c : row_cases()) {
    const auto q = gaussian(c.nq * c.dim, 7 * c.dim + c.nq);
    const auto k32 = gaussian(c.n * c.dim, 11 * c.dim + c.nq);
    const auto k16 = halves(k32);
    std::vector<float> s16(c.nq * c.n + 3, -99.0f), s32(c.nq * c.n + 3, -99.0f);
    simd::dot_f16_rows(q.data(), c.nq, k16.data(), c.n, c.dim, s16.data());
    simd::dot_f32_rows(q.data(), c.nq, k32.data(), c.n, c.dim, s32.data());
    for (size_t i = 0; i < c.nq; ++i)
      for (size_t t = 0; t < c.n; ++t) {
        double r16 = 0, r32 = 0;
        for (size_t d = 0; d < c.dim; ++d) {
          r16 += static_cast<double>(q[i * c.dim + d]) * f16_to_f32(k16[t * c.dim + d]);
          r32 += static_cast<double>(q[i * c.dim + d]) * k32[t * c.dim + d];
        }
        ASSERT_NEAR(s16[i * c.n + t], r16, tol(c.dim))
            << "f16 nq=" << c.nq << " n=" << c.n << " dim=" << c.dim << " i=" << i << " t=" << t;
        ASSERT_NEAR(s32[i * c.n + t], r32, tol(c.dim))
            << "f32 nq=" << c.nq << " n=" << c.n << " dim=" << c.dim << " i=" << i << " t=" << t;
      }
    for (size_t j = c.nq * c.n; j < s16.size(); ++j) {
      ASSERT_EQ(s16[j], -99.0f);
      ASSERT_EQ(s32[j], -99.0f);
    }
  }
}

TEST(Simd, AccumulateRowsF16AndF32MatchScalar) {
  for (const auto& c : row_cases()) {
    const auto w = gaussian(c.nq * c.n, 13 * c.dim + c.nq);
    const auto v32 = gaussian(c.n * c.dim, 17 * c.dim + c.nq);
    const auto v16 = halves(v32);
    // Accumulates on top of existing contents.
    const auto init = gaussian(c.nq * c.dim + 3, 19 * c.dim + c.nq);
    auto o16 = init, o32 = init;
    simd::accumulate_f16_rows(w.data(), c.nq, v16.data(), c.n, c.dim, o16.data());
    simd::accumulate_f32_rows(w.data(), c.nq, v32.data(), c.n, c.dim, o32.data());
    for (size_t i = 0; i < c.nq; ++i)
      for (size_t d = 0; d < c.dim; ++d) {
        double r16 = init[i * c.dim + d], r32 = init[i * c.dim + d];
        for (size_t t = 0; t < c.n; ++t) {
          r16 += static_cast<double>(w[i * c.n + t]) * f16_to_f32(v16[t * c.dim + d]);
          r32 += static_cast<double>(w[i * c.n + t]) * v32[t * c.dim + d];
        }
        ASSERT_NEAR(o16[i * c.dim + d], r16, tol(c.n))
            << "f16 nq=" << c.nq << " n=" << c.n << " dim=" << c.dim << " i=" << i << " d=" << d;
        ASSERT_NEAR(o32[i * c.dim + d], r32, tol(c.n))
            << "f32 nq=" << c.nq << " n=" << c.n << " dim=" << c.dim << " i=" << i << " d=" << d;
      }
    for (size_t j = c.nq * c.dim; j < init.size(); ++j) {
      ASSERT_EQ(o16[j], init[j]);
      ASSERT_EQ(o32[j], init[j]);
    }
  }
}

TEST(Simd, RowsWithZeroTokensDoNothing) {
  const auto q = gaussian(3 * 16, 1);
  std::vector<float> out(3 * 16, 2.0f);
  simd::accumulate_f32_rows(nullptr, 3, nullptr, 0, 16, out.data());
  for (float x : out) EXPECT_EQ(x, 2.0f);
  std::vector<float> s(4, 5.0f);
  simd::dot_f32_rows(q.data(), 3, nullptr, 0, 16, s.data());
  for (float x : s) EXPECT_EQ(x, 5.0f);
}

// A codec's channel split may leave a part empty (kitty's boosted channels): rows of no channels
// score 0 and add nothing.
TEST(Simd, RowsOfNoChannelsScoreZero) {
  const std::vector<float> q(2, 1.0f), w(2 * 20, 1.0f);
  const std::vector<uint16_t> k(1, 0);
  std::vector<float> s(2 * 20, 5.0f), out(2, 3.0f);
  simd::dot_f16_rows(q.data(), 2, k.data(), 20, 0, s.data());
  for (float x : s) EXPECT_EQ(x, 0.0f);
  simd::accumulate_f16_rows(w.data(), 2, k.data(), 20, 0, out.data());
  for (float x : out) EXPECT_EQ(x, 3.0f);
}

TEST(Simd, HalfConversionsMatchScalar) {
  for (size_t n : kDims) {
    auto x = gaussian(n, 23 * n);
    for (auto& v : x) v *= 1000.0f;  // includes values that round coarsely
    std::vector<uint16_t> h(n + 2, 0xBEEF);
    simd::f32_to_f16(x.data(), h.data(), n);
    std::vector<float> back(n + 2, -1.0f);
    simd::f16_to_f32(h.data(), back.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], f32_to_f16(x[i]));
      ASSERT_EQ(back[i], f16_to_f32(h[i]));
    }
    EXPECT_EQ(h[n], 0xBEEF);
    EXPECT_EQ(back[n], -1.0f);
  }
}

// Softmax over a row split in two blocks equals the softmax of the joined row, and stays finite
// for scores far beyond exp's range.
TEST(Simd, SoftmaxOverTwoBlocksMatchesDoublePrecision) {
  for (size_t na : {0u, 1u, 5u, 16u, 37u}) {
    for (size_t nb : {0u, 1u, 19u, 64u}) {
      if (na + nb == 0) continue;
      auto a = gaussian(na, 100 + na), b = gaussian(nb, 200 + nb);
      for (auto& v : a) v = 30.0f * v + 500.0f;
      for (auto& v : b) v = 30.0f * v + 500.0f;
      std::vector<double> joined(a.begin(), a.end());
      joined.insert(joined.end(), b.begin(), b.end());
      const double mx = *std::max_element(joined.begin(), joined.end());
      double sum = 0;
      for (auto& v : joined) sum += (v = std::exp(v - mx));
      simd::softmax(a.data(), na, b.data(), nb);
      for (size_t i = 0; i < na + nb; ++i) {
        const float got = i < na ? a[i] : b[i - na];
        ASSERT_NEAR(got, joined[i] / sum, 1e-6 + 1e-5 * joined[i] / sum) << na << "+" << nb << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace veloxquant
