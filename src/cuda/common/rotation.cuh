// The CPU's Rotation (core/rotation.cpp) on the GPU, for the formats that code rotated vectors
// (TurboQuant, VecInfer's keys): a randomized Hadamard transform (signs, then the Walsh-Hadamard
// butterflies) where head_dim is a power of two, a dense orthogonal matrix otherwise.
#pragma once

#include "cuda/common/device_math.cuh"

namespace veloxquant::cuda {

// Coordinate c of R x for one row x per block, thread c holding x_c in v, with the CPU's float
// operations in its order: signs, the butterflies stage by stage (in registers and warp shuffles
// while a pair sits inside one warp), then the 1/sqrt(d) scale; or row c of the dense matrix
// dotted with x from coordinate 0 up, a multiply and an add at a time. Every thread of the block
// calls it (it synchronizes); threads c >= d take part with anything and get 0. y: d floats of
// shared memory.
__device__ inline float rotate_coordinate(float v, int c, int d, const float* signs, const float* dense,
                                          float hadamard_scale, float* y) {
  if (dense != nullptr) {
    if (c < d) y[c] = v;
    __syncthreads();
    float sum = 0;
    if (c < d)
      for (int j = 0; j < d; ++j) sum = __fadd_rn(sum, __fmul_rn(dense[c * d + j], y[j]));
    __syncthreads();
    return sum;
  }
  v = c < d ? __fmul_rn(v, signs[c]) : 0.0f;
  // Butterfly stage `len`: the lower coordinate of each pair (a, a + len) becomes y[a] + y[a + len],
  // the upper y[a] - y[a + len]. Pairs closer than a warp trade through shuffles, the rest
  // through shared memory.
  for (int len = 1; len < d; len <<= 1) {
    float partner;
    if (len < kWarp) {
      partner = __shfl_xor_sync(0xffffffffu, v, len);
    } else {
      if (c < d) y[c] = v;
      __syncthreads();
      partner = c < d ? y[c ^ len] : 0.0f;
      __syncthreads();
    }
    v = (c & len) ? __fsub_rn(partner, v) : __fadd_rn(v, partner);
  }
  return c < d ? __fmul_rn(v, hadamard_scale) : 0.0f;
}

// R x for ROWS rows of D floats in shared memory, in place, block-wide with THREADS threads (a
// query group, once per attention block): signs then the butterflies, without the 1/sqrt(D) the
// caller folds in later; at head sizes that are not powers of two, the dense matrix.
template <int D, int ROWS, int THREADS>
__device__ void rotate_rows(float* x, const float* signs, const float* dense) {
  constexpr bool kDense = (D & (D - 1)) != 0;
  if constexpr (kDense) {
    // Each thread's outputs wait in registers until every thread has read the rows.
    constexpr int kPerThread = (ROWS * D + THREADS - 1) / THREADS;
    float rotated[kPerThread];
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      const int i = threadIdx.x + r * THREADS;
      rotated[r] = 0;
      if (i < ROWS * D) {
        const float* q = x + i / D * D;
        const float* row = dense + (i % D) * D;
        for (int j = 0; j < D; ++j) rotated[r] = fmaf(row[j], q[j], rotated[r]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPerThread; ++r)
      if (threadIdx.x + r * THREADS < ROWS * D) x[threadIdx.x + r * THREADS] = rotated[r];
    __syncthreads();
  } else {
    for (int i = threadIdx.x; i < ROWS * D; i += THREADS) x[i] *= signs[i % D];
    __syncthreads();
    for (int len = 1; len < D; len <<= 1) {
      for (int i = threadIdx.x; i < ROWS * D / 2; i += THREADS) {
        const int h = i / (D / 2), pair = i % (D / 2);
        const int a = h * D + pair / len * 2 * len + pair % len;
        const float p = x[a], q = x[a + len];
        x[a] = p + q, x[a + len] = p - q;
      }
      __syncthreads();
    }
  }
}

}  // namespace veloxquant::cuda
