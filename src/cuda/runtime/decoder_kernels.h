// The small operations of the forward pass on the GPU (decoder.cu runs them between cuBLAS
// projections). Each mirrors the CPU runtime's arithmetic (runtime/session/session.cpp) so that
// logits agree up to the fp16 rounding of the weights and of the projections' inputs.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace veloxquant::cuda {

// The element types below (T): __half or float, the decoder's precision.

// x[t] = table[tokens[t]] as f32 (times scale when it is not 1), rows of d.
template <class T>
void launch_embed_rows(const T* table, const int32_t* tokens, int n, int d, float scale, float* x,
                       cudaStream_t s);
// y[t] = x[t] / rms(x[t]) * w: the sum of squares in double, like the CPU's rms_norm. y may be x
// (T float): per-head q/k norms and the post-norms run in place.
template <class T>
void launch_rms_norm(const float* x, const float* w, int n, int d, float eps, T* y, cudaStream_t s);
// y[t][i] += bias[i] for n rows of `width`.
void launch_add_bias(float* y, const float* bias, int n, int width, cudaStream_t s);

// Rows [n, batch, heads, head_dim] of f32 (token i of every sequence, then token i + 1), rotated
// by RoPE at positions[i] (rope_half pairs; 0: none) and rounded to fp16, written token-major
// ([n, batch, heads, head_dim], queries) or head-major ([batch, heads, n, head_dim], what
// DeviceCache::append takes).
struct RopeRows {
  const float* x = nullptr;
  int n = 0, batch = 1, heads = 0, head_dim = 0;
  const int64_t* positions = nullptr;
  const double* inv_freq = nullptr;
  int rope_half = 0;
  double magnitude = 1.0;  // the rotated pair times this (YaRN's attention factor)
  bool neox = false;  // pairs (i, i + rope_half) instead of (2i, 2i + 1)
  bool head_major = false;
  // Queries: every value times scale after RoPE, and with temperature_scale > 0 times
  // 1 + temperature_scale * log(floor(pos / temperature_floor) + 1) (DecoderShape's).
  float scale = 1.0f, temperature_scale = 0.0f;
  int64_t temperature_floor = 1;
  __half* out = nullptr;
};
void launch_rope_rows(const RopeRows& r, cudaStream_t s);

// out = act(gate) * up, n values: SiLU (the CPU's g / (1 + exp(-g)) * u) or, with gelu, GELU's
// tanh approximation as the CPU's gated() computes it.
template <class T>
void launch_gated(bool gelu, const float* gate, const float* up, size_t n, T* out, cudaStream_t s);
// x = cap * tanh(x / cap), n values (the CPU's softcap).
void launch_softcap(float* x, size_t n, float cap, cudaStream_t s);
// y[rows] = w[rows, cols] x[cols] (f32 sums): the decode step's projections, one warp per output
// row reading the row in 16-byte loads; cols a multiple of 16 / sizeof(T), w and x 16-byte aligned.
// A step of one token is a matrix-vector product, which cuBLAS's GEMM pays a heuristic for.
template <class T>
void launch_gemv(const T* w, int rows, int cols, const T* x, float* y, cudaStream_t s);

// x += y, n values.
void launch_add(float* x, const float* y, size_t n, cudaStream_t s);
// y = x as fp16, n values.
void launch_to_half(const float* x, size_t n, __half* y, cudaStream_t s);

}  // namespace veloxquant::cuda
