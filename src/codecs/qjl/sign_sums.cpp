#include "codecs/qjl/sign_sums.h"

#include <hwy/highway.h>

#include <algorithm>

#include "core/sum_lanes4.h"

namespace veloxquant::qjl {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Rows sharing each loaded vector of u: 4 rows x 4 vectors of sums fill half the registers.
constexpr size_t kRows = 4;

float scalar_masked_sum(const float* u, const uint8_t* bits, size_t begin, size_t m) {
  float s = 0;
  for (size_t i = begin; i < m; ++i) s += ((bits[i / 8] >> (i % 8)) & 1) ? u[i] : 0.0f;
  return s;
}


// Each run of Lanes bits becomes a lane mask, and the masked lanes of u are added to the record's
// sums (one masked add per vector of u). After the first bit string the sums are scaled by wa,
// and the second one adds wb * v with masked FMAs, so one reduction per record serves both parts.
// Needs whole bytes per vector: L % 8 == 0.
template <size_t NU>
void vector_rows(const SignRows& R, const float* u, const float* v, size_t stride, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df), a_end = R.m - R.m % L, b_end = R.mb - R.mb % L;
  for (size_t t = 0; t < R.n; t += kRows) {
    const size_t live = std::min(kRows, R.n - t);
    // Past the last record, the last one is repeated and its duplicate sums are discarded.
    size_t at[kRows];
    const uint8_t* row[kRows];
    for (size_t r = 0; r < kRows; ++r) {
      at[r] = t + std::min(r, live - 1);
      row[r] = R.rows + at[r] * R.row_stride;
    }
    VF acc[kRows][4];
    for (size_t r = 0; r < kRows; ++r)
      for (size_t j = 0; j < 4; ++j) acc[r][j] = hn::Zero(df);
    for (size_t i = 0; i < a_end; i += L) {
      VF uj[NU];
#pragma GCC unroll 4
      for (size_t j = 0; j < NU; ++j) uj[j] = hn::LoadU(df, u + j * stride + i);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const auto set = hn::LoadMaskBits(df, row[r] + i / 8);
#pragma GCC unroll 4
        for (size_t j = 0; j < NU; ++j) acc[r][j] = hn::IfThenElse(set, hn::Add(acc[r][j], uj[j]), acc[r][j]);
      }
    }
    VF wb[kRows];
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) {
      const VF wa = hn::Set(df, R.wa[at[r]]);
      for (size_t j = 0; j < NU; ++j) acc[r][j] = hn::Mul(acc[r][j], wa);
      wb[r] = hn::Set(df, R.mb ? R.wb[at[r]] : 0.0f);
    }
    for (size_t i = 0; i < b_end; i += L) {
      VF vj[NU];
#pragma GCC unroll 4
      for (size_t j = 0; j < NU; ++j) vj[j] = hn::LoadU(df, v + j * stride + i);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const auto set = hn::LoadMaskBits(df, row[r] + R.m / 8 + i / 8);
#pragma GCC unroll 4
        for (size_t j = 0; j < NU; ++j)
          acc[r][j] = hn::IfThenElse(set, hn::MulAdd(vj[j], wb[r], acc[r][j]), acc[r][j]);
      }
    }
    for (size_t r = 0; r < live; ++r) {
      float s[4];
      simd::sum_lanes4(DF(), acc[r], s);
      for (size_t j = 0; j < NU; ++j) {
        float tail = R.wa[at[r]] * scalar_masked_sum(u + j * stride, row[r], a_end, R.m);
        if (R.mb) tail += R.wb[at[r]] * scalar_masked_sum(v + j * stride, row[r] + R.m / 8, b_end, R.mb);
        out[j * R.n + at[r]] = s[j] + tail;
      }
    }
  }
}
}  // namespace

void weighted_masked_sums(const SignRows& r, const float* u, const float* v, size_t nu,
                          size_t stride, float* out) {
  if (hn::Lanes(DF()) % 8 != 0) {  // e.g. 4-lane vectors: no whole byte of mask bits
    for (size_t t = 0; t < r.n; ++t) {
      const uint8_t* row = r.rows + t * r.row_stride;
      for (size_t j = 0; j < nu; ++j) {
        float s = r.wa[t] * scalar_masked_sum(u + j * stride, row, 0, r.m);
        if (r.mb) s += r.wb[t] * scalar_masked_sum(v + j * stride, row + r.m / 8, 0, r.mb);
        out[j * r.n + t] = s;
      }
    }
    return;
  }
  switch (nu) {
    case 1: vector_rows<1>(r, u, v, stride, out); break;
    case 2: vector_rows<2>(r, u, v, stride, out); break;
    case 3: vector_rows<3>(r, u, v, stride, out); break;
    default: vector_rows<4>(r, u, v, stride, out); break;
  }
}

void outlier_sketch(const float* const* col, const float* a, size_t n, size_t nq, const float* s,
                    size_t m, float* v, float* u) {
  const DF df;
  const size_t L = hn::Lanes(df), vec_end = m - m % L;
  for (size_t i0 = 0; i0 < nq; i0 += 4) {
    const size_t nu = std::min<size_t>(4, nq - i0);
    for (size_t k = 0; k < vec_end; k += L) {
      // Up to four queries: independent FMA chains sharing every loaded column vector.
      VF acc[4] = {hn::Zero(df), hn::Zero(df), hn::Zero(df), hn::Zero(df)};
      for (size_t j = 0; j < n; ++j) {
        const VF c = hn::LoadU(df, col[j] + k);
        for (size_t i = 0; i < nu; ++i) acc[i] = hn::MulAdd(hn::Set(df, a[(i0 + i) * n + j]), c, acc[i]);
      }
      for (size_t i = 0; i < nu; ++i) {
        const size_t at = (i0 + i) * m + k;
        hn::StoreU(acc[i], df, v + at);
        hn::StoreU(hn::Sub(hn::LoadU(df, s + at), acc[i]), df, u + at);
      }
    }
    for (size_t i = i0; i < i0 + nu; ++i)
      for (size_t k = vec_end; k < m; ++k) {
        float acc = 0;
        for (size_t j = 0; j < n; ++j) acc += a[i * n + j] * col[j][k];
        v[i * m + k] = acc;
        u[i * m + k] = s[i * m + k] - acc;
      }
  }
}

}  // namespace veloxquant::qjl
