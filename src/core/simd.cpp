#include "core/simd.h"

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/prefetch.h"
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

// Scores of rows [t0, t0 + R) for M queries. R * M accumulators run as independent FMA chains
// (one chain per row would wait on the FMA latency at every vector), and each key vector is
// loaded once for M queries. The rows are read one after another: interleaving them (a vector
// of each row in turn) left the loads waiting on memory, 12 against 18 GB/s on one core. Each
// score sums its channels in the same order as one row at a time would, so the result does not
// depend on the blocking.
template <size_t M, size_t R, class D, typename T>
HWY_INLINE void dot_block(D df, const float* q, size_t dim, const T* k, size_t t0, size_t n, float* scores) {
  const size_t L = hn::Lanes(df);
  const size_t vec_end = dim - dim % L;
  hn::Vec<D> acc[M][R];
  for (size_t j = 0; j < M; ++j) {
    for (size_t r = 0; r < R; ++r) acc[j][r] = hn::Zero(df);
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < vec_end; c += L) {
      const auto x = load_row(df, k + (t0 + r) * dim + c);
      for (size_t j = 0; j < M; ++j) acc[j][r] = hn::MulAdd(x, hn::LoadU(df, q + j * dim + c), acc[j][r]);
    }
  }
  for (size_t r = 0; r < R; ++r) {
    const T* row = k + (t0 + r) * dim;
    for (size_t j = 0; j < M; ++j) {
      float s = reduce(df, acc[j][r]);
      for (size_t c = vec_end; c < dim; ++c) s += scalar_of(row[c]) * q[j * dim + c];
      scores[j * n + t0 + r] = s;
    }
  }
}

// How far ahead of the rows being read the kernels ask for rows (core/prefetch.h): with one
// query a kernel computes between its reads, and the hardware prefetchers stop at every page.
constexpr size_t kPrefetchBytes = 4096;

// Eight accumulators in all: rows per block shrink as queries per block grow.
template <size_t M, class D, typename T>
void dot_queries(D df, const float* q, const T* k, size_t n, size_t dim, float* scores) {
  constexpr size_t R = M == 1 ? 8 : M == 2 ? 4 : 2;
  // Empty rows (dim 0: a codec's empty channel split) score 0 and ask for nothing.
  const size_t row_bytes = dim * sizeof(T),
               ahead = row_bytes ? (kPrefetchBytes + row_bytes - 1) / row_bytes : 0;
  size_t t = 0;
  for (; t + R <= n; t += R) {
    if (t + ahead + R <= n) prefetch_range(k + (t + ahead) * dim, R * row_bytes);
    dot_block<M, R>(df, q, dim, k, t, n, scores);
  }
  for (; t < n; ++t) dot_block<M, 1>(df, q, dim, k, t, n, scores);
}

// Calls fn(M, i0) for the queries in blocks of up to four, M a compile-time count: up to four
// queries share each loaded row, which is how grouped-query attention reuses K and V.
template <class Fn>
void by_query_blocks(size_t nq, Fn&& fn) {
  for (size_t i0 = 0; i0 < nq; i0 += 4) {
    switch (nq - i0 < 4 ? nq - i0 : 4) {
      case 1: fn(std::integral_constant<size_t, 1>{}, i0); break;
      case 2: fn(std::integral_constant<size_t, 2>{}, i0); break;
      case 3: fn(std::integral_constant<size_t, 3>{}, i0); break;
      default: fn(std::integral_constant<size_t, 4>{}, i0); break;
    }
  }
}

template <class D, typename T>
void dot_rows(D df, const float* q, size_t nq, const T* k, size_t n, size_t dim, float* scores) {
  by_query_blocks(nq, [&](auto m, size_t i0) {
    dot_queries<decltype(m)::value>(df, q + i0 * dim, k, n, dim, scores + i0 * n);
  });
}

// out[j] += sum_t w[j][t] v[t] over rows [t0, t1) for M queries and the g column vectors from
// column c0 (G_MAX at most: registers are reserved for G_MAX, the loops stop at g). The M * G_MAX outputs
// stay in registers across the rows: storing them back per row would chain every FMA through memory.
// Rows [t1, prefetch_end) of the next chunk are asked for one per row of this one.
template <size_t M, size_t G_MAX, class D, typename T>
HWY_INLINE void accumulate_block(D df, const float* const* w, const T* v, size_t dim, size_t t0, size_t t1,
                                 size_t c0, size_t g, size_t prefetch_end, float* out) {
  const size_t L = hn::Lanes(df);
  hn::Vec<D> acc[M][G_MAX];
  for (size_t j = 0; j < M; ++j) {
    for (size_t i = 0; i < G_MAX; ++i) {
      if (i < g) acc[j][i] = hn::LoadU(df, out + j * dim + c0 + i * L);
    }
  }
  for (size_t t = t0; t < t1; ++t) {
    if (t - t0 + t1 < prefetch_end) prefetch_range(v + (t - t0 + t1) * dim, dim * sizeof(T));
    hn::Vec<D> wv[M];
    for (size_t j = 0; j < M; ++j) wv[j] = hn::Set(df, w[j][t]);
    for (size_t i = 0; i < G_MAX; ++i) {
      if (i >= g) break;
      const auto x = load_row(df, v + t * dim + c0 + i * L);
      for (size_t j = 0; j < M; ++j) acc[j][i] = hn::MulAdd(x, wv[j], acc[j][i]);
    }
  }
  for (size_t j = 0; j < M; ++j) {
    for (size_t i = 0; i < G_MAX; ++i) {
      if (i < g) hn::StoreU(acc[j][i], df, out + j * dim + c0 + i * L);
    }
  }
}

// Rows go in chunks small enough to stay in L1 while every column group passes over them, so
// the value rows stream from memory once; the first group's pass asks for the next chunk. Each
// output still sums its rows in order t = 0..n-1.
template <size_t M, class D, typename T>
void accumulate_queries(D df, const float* const* w, const T* v, size_t n, size_t dim, float* out) {
  constexpr size_t G = M == 1 ? 8 : M == 2 ? 4 : 2;
  constexpr size_t kChunkRows = 64;
  const size_t L = hn::Lanes(df);
  const size_t vecs = dim / L;
  for (size_t t0 = 0; t0 < n; t0 += kChunkRows) {
    const size_t t1 = t0 + kChunkRows < n ? t0 + kChunkRows : n;
    for (size_t i0 = 0; i0 < vecs; i0 += G) {
      const size_t prefetch_end = i0 == 0 ? std::min(n, t1 + kChunkRows) : 0;
      accumulate_block<M, G>(df, w, v, dim, t0, t1, i0 * L, vecs - i0 < G ? vecs - i0 : G, prefetch_end, out);
    }
  }
  for (size_t c = vecs * L; c < dim; ++c) {
    for (size_t t = 0; t < n; ++t) {
      const float x = scalar_of(v[t * dim + c]);
      for (size_t j = 0; j < M; ++j) out[j * dim + c] += w[j][t] * x;
    }
  }
}

template <class D, typename T>
void accumulate_rows(D df, const float* w, size_t nq, const T* v, size_t n, size_t dim, float* out) {
  by_query_blocks(nq, [&](auto m, size_t i0) {
    constexpr size_t M = decltype(m)::value;
    const float* wr[M];
    for (size_t j = 0; j < M; ++j) wr[j] = w + (i0 + j) * n;
    accumulate_queries<M>(df, wr, v, n, dim, out + i0 * dim);
  });
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

// Below this exp() is under FLT_MIN: a subnormal, whose every later product costs a microcode
// assist. Such weights are 0 here, as a token a codec excluded (kExcluded) must weigh.
constexpr float kExpUnderflow = -87.0f;

// x = exp(x - mx) in place; returns the sum.
float exp_shifted(float* x, size_t n, float mx) {
  const DF df;
  const size_t L = hn::Lanes(df);
  const auto vmx = hn::Set(df, mx), floor = hn::Set(df, kExpUnderflow);
  auto sum = hn::Zero(df);
  size_t i = 0;
  for (; i + L <= n; i += L) {
    const auto shifted = hn::Sub(hn::LoadU(df, x + i), vmx);
    const auto e = hn::IfThenZeroElse(hn::Lt(shifted, floor), hn::Exp(df, shifted));
    hn::StoreU(e, df, x + i);
    sum = hn::Add(sum, e);
  }
  float total = reduce(df, sum);
  for (; i < n; ++i) total += (x[i] = x[i] - mx < kExpUnderflow ? 0.0f : std::exp(x[i] - mx));
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
