#include "core/simd.h"

#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>

#include "veloxquant/tensor.h"

namespace veloxquant::simd {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// Loads Lanes(DF) halves starting at p and widens them to f32 (F16C / AVX-512 cvtph).
HWY_INLINE hn::Vec<DF> load_f16(DF df, const uint16_t* p) {
  const DH dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

HWY_INLINE float reduce(DF df, hn::Vec<DF> v) { return hn::GetLane(hn::SumOfLanes(df, v)); }

HWY_INLINE hn::Vec<DF> load_row(DF df, const float* p) { return hn::LoadU(df, p); }
HWY_INLINE hn::Vec<DF> load_row(DF df, const uint16_t* p) { return load_f16(df, p); }

// Up to four queries share each loaded key row, which is how grouped-query attention reuses K.
template <typename T>
void dot_rows(const float* q, size_t nq, const T* k, size_t n, size_t dim, float* scores) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t vec_end = dim - dim % L;
  for (size_t i0 = 0; i0 < nq; i0 += 4) {
    const size_t m = nq - i0 < 4 ? nq - i0 : 4;
    for (size_t t = 0; t < n; ++t) {
      const T* row = k + t * dim;
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (size_t c = 0; c < vec_end; c += L) {
        const auto x = load_row(df, row + c);
        a0 = hn::MulAdd(x, hn::LoadU(df, q + (i0 + 0) * dim + c), a0);
        if (m > 1) a1 = hn::MulAdd(x, hn::LoadU(df, q + (i0 + 1) * dim + c), a1);
        if (m > 2) a2 = hn::MulAdd(x, hn::LoadU(df, q + (i0 + 2) * dim + c), a2);
        if (m > 3) a3 = hn::MulAdd(x, hn::LoadU(df, q + (i0 + 3) * dim + c), a3);
      }
      float s[4] = {reduce(df, a0), reduce(df, a1), reduce(df, a2),
                    reduce(df, a3)};
      for (size_t c = vec_end; c < dim; ++c) {
        float x;
        if constexpr (sizeof(T) == 2) x = veloxquant::f16_to_f32(row[c]); else x = row[c];
        for (size_t j = 0; j < m; ++j) s[j] += x * q[(i0 + j) * dim + c];
      }
      for (size_t j = 0; j < m; ++j) scores[(i0 + j) * n + t] = s[j];
    }
  }
}

template <typename T>
void accumulate_rows(const float* w, size_t nq, const T* v, size_t n, size_t dim, float* out) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const size_t vec_end = dim - dim % L;
  for (size_t i0 = 0; i0 < nq; i0 += 4) {
    const size_t m = nq - i0 < 4 ? nq - i0 : 4;
    for (size_t t = 0; t < n; ++t) {
      const T* row = v + t * dim;
      float wt[4] = {0, 0, 0, 0};
      for (size_t j = 0; j < m; ++j) wt[j] = w[(i0 + j) * n + t];
      const auto w0 = hn::Set(df, wt[0]), w1 = hn::Set(df, wt[1]), w2 = hn::Set(df, wt[2]),
                 w3 = hn::Set(df, wt[3]);
      for (size_t c = 0; c < vec_end; c += L) {
        const auto x = load_row(df, row + c);
        float* o = out + i0 * dim + c;
        hn::StoreU(hn::MulAdd(x, w0, hn::LoadU(df, o)), df, o);
        if (m > 1) hn::StoreU(hn::MulAdd(x, w1, hn::LoadU(df, o + dim)), df, o + dim);
        if (m > 2) hn::StoreU(hn::MulAdd(x, w2, hn::LoadU(df, o + 2 * dim)), df, o + 2 * dim);
        if (m > 3) hn::StoreU(hn::MulAdd(x, w3, hn::LoadU(df, o + 3 * dim)), df, o + 3 * dim);
      }
      for (size_t c = vec_end; c < dim; ++c) {
        float x;
        if constexpr (sizeof(T) == 2) x = veloxquant::f16_to_f32(row[c]); else x = row[c];
        for (size_t j = 0; j < m; ++j) out[(i0 + j) * dim + c] += wt[j] * x;
      }
    }
  }
}
}  // namespace

float dot(const float* a, const float* b, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  auto acc = hn::Zero(df);
  size_t i = 0;
  for (; i + L <= n; i += L) acc = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), acc);
  float s = reduce(df, acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

namespace {
float max_of(const float* x, size_t n, float m0) {
  const DF df;
  const size_t L = hn::Lanes(df);
  auto m = hn::Set(df, m0);
  size_t i = 0;
  for (; i + L <= n; i += L) m = hn::Max(m, hn::LoadU(df, x + i));
  float mx = hn::GetLane(hn::MaxOfLanes(df, m));
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

// x = exp(x - mx) in place; returns the sum.
float exp_shifted(float* x, size_t n, float mx) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto vmx = hn::Set(df, mx);
  auto sum = hn::Zero(df);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vmx));
    hn::StoreU(e, df, x + i);
    sum = hn::Add(sum, e);
  }
  float total = reduce(df, sum);
  for (; i < n; ++i) total += (x[i] = std::exp(x[i] - mx));
  return total;
}

void scale(float* x, size_t n, float s) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), vs), df, x + i);
  for (; i < n; ++i) x[i] *= s;
}
}  // namespace

void softmax(float* a, size_t na, float* b, size_t nb) {
  const float first = na ? a[0] : b[0];
  const float mx = max_of(b, nb, max_of(a, na, first));
  const float inv = 1.0f / (exp_shifted(a, na, mx) + exp_shifted(b, nb, mx));
  scale(a, na, inv);
  scale(b, nb, inv);
}

void axpy(float a, const float* x, float* y, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto va = hn::Set(df, a);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::MulAdd(va, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
  for (; i < n; ++i) y[i] += a * x[i];
}

void dot_f16_rows(const float* q, size_t nq, const uint16_t* k, size_t n, size_t dim,
                  float* scores) {
  dot_rows(q, nq, k, n, dim, scores);
}
void accumulate_f16_rows(const float* w, size_t nq, const uint16_t* v, size_t n, size_t dim,
                         float* out) {
  accumulate_rows(w, nq, v, n, dim, out);
}
void dot_f32_rows(const float* q, size_t nq, const float* k, size_t n, size_t dim, float* scores) {
  dot_rows(q, nq, k, n, dim, scores);
}
void accumulate_f32_rows(const float* w, size_t nq, const float* v, size_t n, size_t dim,
                         float* out) {
  accumulate_rows(w, nq, v, n, dim, out);
}

void f16_to_f32(const uint16_t* in, float* out, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(load_f16(df, in + i), df, out + i);
  for (; i < n; ++i) out[i] = veloxquant::f16_to_f32(in[i]);
}

void f32_to_f16(const float* in, uint16_t* out, size_t n) {
  // Hardware conversion rounds to nearest even, like the scalar one (tested to agree bit for bit).
  const DF df;
  const DH dh;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
  }
  for (; i < n; ++i) out[i] = veloxquant::f32_to_f16(in[i]);
}

}  // namespace veloxquant::simd

namespace veloxquant {
void f16_to_f32(const uint16_t* in, float* out, size_t n) { simd::f16_to_f32(in, out, n); }
void f32_to_f16(const float* in, uint16_t* out, size_t n) { simd::f32_to_f16(in, out, n); }
}  // namespace veloxquant
