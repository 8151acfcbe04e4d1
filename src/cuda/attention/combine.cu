// The second pass of flash-decoding: per query head, the splits' partial (max, sum, output) merge
// into the softmax-normalized output. For TurboQuant values the merged sum is still in the
// rotated space, and is rotated back here, once per head (Hadamard transform, then the signs).
#include "cuda/attention/launchers.h"
#include "cuda/common/check.cuh"

#include <cmath>

namespace veloxquant::cuda {
namespace {

__global__ void combine_kernel(CombineParams p, float hadamard_scale) {
  extern __shared__ float row[];  // head_dim values
  const size_t head = blockIdx.x;  // b * q_heads + query head
  const float* ml = p.part_ml + head * p.splits * 2;
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, ml[2 * s]);
  float sum = 0;
  for (int s = 0; s < p.splits; ++s) sum += ml[2 * s] == -INFINITY ? 0.0f : __expf(ml[2 * s] - mx) * ml[2 * s + 1];
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
    float o = 0;
    for (int s = 0; s < p.splits; ++s) {
      if (ml[2 * s] == -INFINITY) continue;
      o += __expf(ml[2 * s] - mx) * p.part_o[(head * p.splits + s) * p.head_dim + c];
    }
    row[c] = o / sum;
  }
  __syncthreads();
  if (p.value_signs != nullptr) {
    for (int len = 1; len < p.head_dim; len <<= 1) {
      for (int i = threadIdx.x; i < p.head_dim / 2; i += blockDim.x) {
        const int a = i / len * 2 * len + i % len;
        const float x = row[a], y = row[a + len];
        row[a] = x + y, row[a + len] = x - y;
      }
      __syncthreads();
    }
    for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) row[c] *= hadamard_scale * p.value_signs[c];
    __syncthreads();
  }
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) p.out[head * p.head_dim + c] = row[c];
}

}  // namespace

void launch_combine(const CombineParams& p, int batch, float hadamard_scale, cudaStream_t stream) {
  combine_kernel<<<batch * p.q_heads, p.head_dim, p.head_dim * sizeof(float), stream>>>(p, hadamard_scale);
  VQ_CUDA_CHECK_LAUNCH("combine_kernel");
}

}  // namespace veloxquant::cuda
