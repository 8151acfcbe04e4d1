// The second pass of flash-decoding: per query head, the splits' partial (max, sum, output) merge
// into the softmax-normalized output. For TurboQuant values the merged sum is still in the
// rotated space, and is rotated back here, once per head (Hadamard transform, then the signs).
#include "cuda/attention/launchers.h"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"

#include <cmath>

namespace veloxquant::cuda {
namespace {

// A block-wide reduction of one value per thread (blockDim.x a multiple of 32, at most 1024):
// every thread gets the result. scratch holds 32 floats; the block synchronizes inside.
template <class Op>
__device__ float block_reduce(float x, float* scratch, Op op) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < warps; ++w) x = op(x, scratch[w]);
  return x;
}

// One block per query head, head_dim threads. The splits' weights exp(m_s - max) are computed
// once, in shared memory, so the per-channel sum is plain loads and multiply-adds, several in
// flight per thread.
__global__ void combine_kernel(CombineParams p, float hadamard_scale) {
  extern __shared__ float smem[];  // row[head_dim], scratch[32], weight[splits]
  float* row = smem;
  float* scratch = row + p.head_dim;
  float* weight = scratch + kWarp;
  const size_t head = blockIdx.x;  // b * q_heads + query head
  const float* ml = p.part_ml + head * p.splits * 2;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < p.splits; s += blockDim.x) mx = fmaxf(mx, ml[2 * s]);
  mx = block_reduce(mx, scratch, [](float a, float b) { return fmaxf(a, b); });
  float sum = 0;
  for (int s = threadIdx.x; s < p.splits; s += blockDim.x) {
    const float w = ml[2 * s] == -INFINITY ? 0.0f : __expf(ml[2 * s] - mx);
    weight[s] = w;
    sum += w * ml[2 * s + 1];
  }
  sum = block_reduce(sum, scratch, [](float a, float b) { return a + b; });
  const float* part = p.part_o + head * p.splits * p.head_dim;
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
    float o[4] = {};
    int s = 0;
    for (; s + 4 <= p.splits; s += 4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) o[j] += weight[s + j] * part[static_cast<size_t>(s + j) * p.head_dim + c];
    }
    for (; s < p.splits; ++s) o[0] += weight[s] * part[static_cast<size_t>(s) * p.head_dim + c];
    row[c] = (o[0] + o[1] + o[2] + o[3]) / sum;
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
  const size_t smem = (p.head_dim + kWarp + p.splits) * sizeof(float);
  if (smem > 48 * 1024) VQ_CUDA_CHECK(cudaFuncSetAttribute(combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  combine_kernel<<<batch * p.q_heads, p.head_dim, smem, stream>>>(p, hadamard_scale);
  VQ_CUDA_CHECK_LAUNCH("combine_kernel");
}

}  // namespace veloxquant::cuda
