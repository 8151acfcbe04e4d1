// Hot loops shared by codecs and the cache, vectorized with Highway (static dispatch: the widest
// target the compiler flags allow).
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::simd {

float dot(const float* a, const float* b, size_t n);
// In place: the concatenation of a[0..na) and b[0..nb) becomes its softmax (max subtracted
// first, so large scores are safe). A row of scores may live in two blocks (encoded tokens and
// the fp16 tail); na + nb >= 1.
void softmax(float* a, size_t na, float* b = nullptr, size_t nb = 0);
// y += a * x
void axpy(float a, const float* x, float* y, size_t n);

// scores[i * n + t] = q_i . k_t, q: [nq, dim] f32, k: [n, dim] f16.
void dot_f16_rows(const float* q, size_t nq, const uint16_t* k, size_t n, size_t dim,
                  float* scores);
// out[i * dim + c] += sum_t w[i * n + t] * v[t, c], v: [n, dim] f16.
void accumulate_f16_rows(const float* w, size_t nq, const uint16_t* v, size_t n, size_t dim,
                         float* out);
// Same two with f32 rows.
void dot_f32_rows(const float* q, size_t nq, const float* k, size_t n, size_t dim, float* scores);
void accumulate_f32_rows(const float* w, size_t nq, const float* v, size_t n, size_t dim,
                         float* out);

void f16_to_f32(const uint16_t* in, float* out, size_t n);
void f32_to_f16(const float* in, uint16_t* out, size_t n);

}  // namespace veloxquant::simd
