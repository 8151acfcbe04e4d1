// The second pass of flash-decoding: per query head, the splits' partial (max, sum, output) merge
// into the softmax-normalized output. For TurboQuant values the merged sum is still in the
// rotated space, and is rotated back here, once per head (Hadamard transform, then the signs; or
// the dense rotation's transpose at head sizes that are not powers of two).
#include "cuda/attention/launchers.h"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"

#include <cmath>
#include <string>

#include "veloxquant/error.h"

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

constexpr int kCombineWarps = 8;
constexpr int kMaxChannelsPerLane = 8;  // head_dim up to 256

// One block per query head, 8 warps. The splits' weights exp(m_s - max) are computed once, in
// shared memory; then each warp sums every 8th split's partial output (lane l holds channels l,
// l + 32, ...: coalesced rows), several rows in flight, and the warps' sums are added at the end.
// A decode step at long context has hundreds of splits per head: one thread per channel walking
// all of them serially would be a chain of dependent loads as long as the split count.
__global__ void __launch_bounds__(kCombineWarps * kWarp) combine_kernel(CombineParams p, float hadamard_scale) {
  extern __shared__ float smem[];  // row[head_dim], scratch[32], warp_sums[8][head_dim], weight[splits]
  float* row = smem;
  float* scratch = row + p.head_dim;
  float* warp_sums = scratch + kWarp;
  float* weight = warp_sums + kCombineWarps * p.head_dim;
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
  sum = block_reduce(sum, scratch, [](float a, float b) { return a + b; });  // also orders weight[]
  const float* part = p.part_o + head * p.splits * p.head_dim;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int per_lane = (p.head_dim - lane + kWarp - 1) / kWarp;  // channels lane, lane + 32, ... < head_dim
  float o[kMaxChannelsPerLane] = {};
  for (int s = warp; s < p.splits; s += kCombineWarps) {
    const float w = weight[s];
    const float* r = part + static_cast<size_t>(s) * p.head_dim + lane;
#pragma unroll
    for (int j = 0; j < kMaxChannelsPerLane; ++j)
      if (j < per_lane) o[j] = fmaf(w, r[j * kWarp], o[j]);
  }
#pragma unroll
  for (int j = 0; j < kMaxChannelsPerLane; ++j)
    if (j < per_lane) warp_sums[warp * p.head_dim + j * kWarp + lane] = o[j];
  __syncthreads();
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
    float total = 0;
    for (int w = 0; w < kCombineWarps; ++w) total += warp_sums[w * p.head_dim + c];
    row[c] = sum > 0 ? total / sum : 0.0f;  // no split saw a token: a query that sees sinks only
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
  // The sinks' partial joins the normalized sum of the splits (whose weight is its sum of
  // exponentials), after the rotation: sink values are stored unrotated.
  float own = 1, other = 0;
  const float* sink = p.sinks != nullptr ? p.sinks + head * (p.head_dim + 2) : nullptr;
  if (sink != nullptr) {
    const float ms = sink[p.head_dim], ls = sink[p.head_dim + 1], m = fmaxf(mx, ms);
    const float a = sum > 0 ? __expf(mx - m) * sum : 0.0f, b = ls > 0 ? __expf(ms - m) : 0.0f;
    own = a / (a + b * ls), other = b / (a + b * ls);
  }
  auto write = [&](int c, float x) {
    p.out[head * p.head_dim + c] = sink != nullptr ? own * x + other * sink[c] : x;
  };
  if (p.value_matrix != nullptr) {  // out = R^T row: thread c walks column c of R
    for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) {
      float sum = 0;
      for (int i = 0; i < p.head_dim; ++i) sum = fmaf(p.value_matrix[i * p.head_dim + c], row[i], sum);
      write(c, sum);
    }
    return;
  }
  for (int c = threadIdx.x; c < p.head_dim; c += blockDim.x) write(c, row[c]);
}

}  // namespace

void launch_combine(const CombineParams& p, int batch, float hadamard_scale, cudaStream_t stream) {
  if (p.head_dim < 1 || p.head_dim > kWarp * kMaxChannelsPerLane) {
    throw Error("combine: head_dim " + std::to_string(p.head_dim) + "; expected 1.." +
                std::to_string(kWarp * kMaxChannelsPerLane));
  }
  const size_t smem = ((1 + kCombineWarps) * p.head_dim + kWarp + p.splits) * sizeof(float);
  if (smem > 48 * 1024) VQ_CUDA_CHECK(cudaFuncSetAttribute(combine_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  combine_kernel<<<batch * p.q_heads, kCombineWarps * kWarp, smem, stream>>>(p, hadamard_scale);
  VQ_CUDA_CHECK_LAUNCH("combine_kernel");
}

}  // namespace veloxquant::cuda
