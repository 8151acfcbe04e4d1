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

// Loads Lanes(d) halves starting at p and widens them to f32 (F16C / AVX-512 cvtph).
template <class D>
HWY_INLINE hn::Vec<D> load_f16(D d, const uint16_t* p) {
  const hn::Rebind<hwy::float16_t, D> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

template <class D>
HWY_INLINE float reduce(D d, hn::Vec<D> v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

template <class D>
HWY_INLINE hn::Vec<D> load_row(D d, const float* p) { return hn::LoadU(d, p); }
template <class D>
HWY_INLINE hn::Vec<D> load_row(D d, const uint16_t* p) { return load_f16(d, p); }

template <typename T>
HWY_INLINE float scalar_of(T x) {
  if constexpr (sizeof(T) == 2) return veloxquant::f16_to_f32(x);
  else return x;
}

// Up to four queries share each loaded key row, which is how grouped-query attention reuses K.
template <class D, typename T>
void dot_rows(D df, const float* q, size_t nq, const T* k, size_t n, size_t dim, float* scores) {
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
      float s[4] = {reduce(df, a0), reduce(df, a1), reduce(df, a2), reduce(df, a3)};
      for (size_t c = vec_end; c < dim; ++c) {
        const float x = scalar_of(row[c]);
        for (size_t j = 0; j < m; ++j) s[j] += x * q[(i0 + j) * dim + c];
      }
      for (size_t j = 0; j < m; ++j) scores[(i0 + j) * n + t] = s[j];
    }
  }
}

// Column block by column block, the up-to-four output rows stay in registers across all n
// value rows: storing them back per value row would chain every FMA through memory.
template <class D, typename T>
void accumulate_rows(D df, const float* w, size_t nq, const T* v, size_t n, size_t dim, float* out) {
  const size_t L = hn::Lanes(df);
  const size_t vec_end = dim - dim % L;
  for (size_t i0 = 0; i0 < nq; i0 += 4) {
    const size_t m = nq - i0 < 4 ? nq - i0 : 4;
    // Rows past m reuse row 0's weights and outputs and are never stored.
    const float* wr[4];
    for (size_t j = 0; j < 4; ++j) wr[j] = w + (i0 + (j < m ? j : 0)) * n;
    float* o = out + i0 * dim;
    for (size_t c = 0; c < vec_end; c += L) {
      auto a0 = hn::LoadU(df, o + c), a1 = a0, a2 = a0, a3 = a0;
      if (m > 1) a1 = hn::LoadU(df, o + dim + c);
      if (m > 2) a2 = hn::LoadU(df, o + 2 * dim + c);
      if (m > 3) a3 = hn::LoadU(df, o + 3 * dim + c);
      for (size_t t = 0; t < n; ++t) {
        const auto x = load_row(df, v + t * dim + c);
        a0 = hn::MulAdd(x, hn::Set(df, wr[0][t]), a0);
        a1 = hn::MulAdd(x, hn::Set(df, wr[1][t]), a1);
        a2 = hn::MulAdd(x, hn::Set(df, wr[2][t]), a2);
        a3 = hn::MulAdd(x, hn::Set(df, wr[3][t]), a3);
      }
      hn::StoreU(a0, df, o + c);
      if (m > 1) hn::StoreU(a1, df, o + dim + c);
      if (m > 2) hn::StoreU(a2, df, o + 2 * dim + c);
      if (m > 3) hn::StoreU(a3, df, o + 3 * dim + c);
    }
    for (size_t c = vec_end; c < dim; ++c) {
      for (size_t t = 0; t < n; ++t) {
        const float x = scalar_of(v[t * dim + c]);
        for (size_t j = 0; j < m; ++j) o[j * dim + c] += wr[j][t] * x;
      }
    }
  }
}

// Runs `kernel` with the widest vector whose lane count divides dim, so that small heads (8 or
// 4 channels) use short vectors instead of the scalar tail; other dims use full vectors plus a tail.
template <class Kernel>
void with_row_width(size_t dim, Kernel&& kernel) {
  const DF full;
  if (dim % hn::Lanes(full) == 0 || dim > 4 * hn::Lanes(full)) return kernel(full);
  const hn::CappedTag<float, 8> eight;
  if (dim % hn::Lanes(eight) == 0) return kernel(eight);
  const hn::CappedTag<float, 4> four;
  if (dim % hn::Lanes(four) == 0) return kernel(four);
  kernel(full);
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
  with_row_width(dim, [&](auto d) { dot_rows(d, q, nq, k, n, dim, scores); });
}
void accumulate_f16_rows(const float* w, size_t nq, const uint16_t* v, size_t n, size_t dim,
                         float* out) {
  with_row_width(dim, [&](auto d) { accumulate_rows(d, w, nq, v, n, dim, out); });
}
void dot_f32_rows(const float* q, size_t nq, const float* k, size_t n, size_t dim, float* scores) {
  with_row_width(dim, [&](auto d) { dot_rows(d, q, nq, k, n, dim, scores); });
}
void accumulate_f32_rows(const float* w, size_t nq, const float* v, size_t n, size_t dim,
                         float* out) {
  with_row_width(dim, [&](auto d) { accumulate_rows(d, w, nq, v, n, dim, out); });
}

void f16_to_f32(const uint16_t* in, float* out, size_t n) {
  const DF df;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(load_f16(df, in + i), df, out + i);
  for (; i < n; ++i) out[i] = veloxquant::f16_to_f32(in[i]);
}

void f32_to_f16(const float* in, uint16_t* out, size_t n) {
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX2
  // Below AVX2 (no F16C) Highway 1.0 emulates DemoteTo by truncating the mantissa, which changes
  // half of all values by one unit (seen in a -march=x86-64-v3 build, where Highway's static target
  // is SSSE3 because AES and PCLMUL are missing). The scalar routine rounds to nearest even.
  for (size_t i = 0; i < n; ++i) out[i] = veloxquant::f32_to_f16(in[i]);
#else
  // Hardware conversion rounds to nearest even, like the scalar one (tested to agree bit for bit).
  const DF df;
  const DH dh;
  const size_t L = hn::Lanes(df);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
  }
  for (; i < n; ++i) out[i] = veloxquant::f32_to_f16(in[i]);
#endif
}

}  // namespace veloxquant::simd

namespace veloxquant {
void f16_to_f32(const uint16_t* in, float* out, size_t n) { simd::f16_to_f32(in, out, n); }
void f32_to_f16(const float* in, uint16_t* out, size_t n) { simd::f32_to_f16(in, out, n); }
}  // namespace veloxquant
