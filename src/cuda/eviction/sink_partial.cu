// One block per (sequence x KV head, query): the sinks' keys are turned to their cache positions
// in shared memory (as the CPU cache turns them, in f32 from the fp16 rows), scored by every query
// head of the group, and summed into the partial. Sinks are at most 64, so this is small beside
// the splits over the rest of the cache.
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "cuda/eviction/sink_partial.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

constexpr int kSinkThreads = 128;
constexpr int kMaxSinks = 64;

__global__ void __launch_bounds__(kSinkThreads) sink_partial_kernel(SinkParams p) {
  extern __shared__ float smem[];  // keys[held][d], values[held][d], scores[group][kMaxSinks]
  const int d = p.head_dim, seq = blockIdx.x, z = blockIdx.y;
  const int b = seq / p.kv_heads, kvh = seq % p.kv_heads, q_heads = p.kv_heads * p.group;
  float* k = smem;
  float* v = k + p.held * d;
  float* s = v + p.held * d;
  const __half* kh = reinterpret_cast<const __half*>(p.keys) + static_cast<size_t>(seq) * p.stride * d;
  const __half* vh = reinterpret_cast<const __half*>(p.values) + static_cast<size_t>(seq) * p.stride * d;
  for (int i = threadIdx.x; i < p.held * d; i += blockDim.x) v[i] = __half2float(vh[i]);
  for (int i = threadIdx.x; i < p.held * (d / 2); i += blockDim.x) {
    const int sink = i / (d / 2), pair = i % (d / 2);
    float x0 = __half2float(kh[sink * d + 2 * pair]), x1 = __half2float(kh[sink * d + 2 * pair + 1]);
    if (pair < p.rope_half) rope_pair(x0, x1, p.inv_freq[pair], p.first_position + sink);
    k[sink * d + 2 * pair] = x0, k[sink * d + 2 * pair + 1] = x1;
  }
  __syncthreads();
  // Query z is cache token tokens - queries + z and sees the sinks up to it.
  const int seen = min(p.held, p.tokens - p.queries + z + 1);
  const size_t row0 = (static_cast<size_t>(z) * p.batch + b) * q_heads + kvh * p.group;
  const __half* q = reinterpret_cast<const __half*>(p.q) + row0 * d;
  for (int i = threadIdx.x; i < p.group * p.held; i += blockDim.x) {
    const int g = i / p.held, sink = i % p.held;
    float dot = 0;
    for (int c = 0; c < d; ++c) dot = fmaf(__half2float(q[g * d + c]), k[sink * d + c], dot);
    float score = dot * p.scale;
    if (p.softcap != 0.0f) score = p.softcap * tanhf(score / p.softcap);
    s[g * kMaxSinks + sink] = sink < seen ? score : -INFINITY;
  }
  __syncthreads();
  for (int g = 0; g < p.group; ++g) {
    const float* sg = s + g * kMaxSinks;
    float mx = -INFINITY;
    for (int i = 0; i < p.held; ++i) mx = fmaxf(mx, sg[i]);
    float* out = p.out + (row0 + g) * (d + 2);
    float sum = 0;
    for (int i = 0; i < p.held; ++i) sum += sg[i] == -INFINITY ? 0.0f : __expf(sg[i] - mx);
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
      float o = 0;
      for (int i = 0; i < p.held; ++i)
        if (sg[i] != -INFINITY) o = fmaf(__expf(sg[i] - mx), v[i * d + c], o);
      out[c] = o;
    }
    if (threadIdx.x == 0) out[d] = mx, out[d + 1] = sum;
  }
}

}  // namespace

void launch_sink_partial(const SinkParams& p, cudaStream_t stream) {
  if (p.held < 1 || p.held > kMaxSinks || p.held > p.stride) {
    throw Error("sink attention: " + std::to_string(p.held) + " sinks held of " + std::to_string(p.stride) +
                "; expected 1.." + std::to_string(kMaxSinks));
  }
  const size_t smem = (2 * static_cast<size_t>(p.held) * p.head_dim +
                       static_cast<size_t>(p.group) * kMaxSinks) *
                      sizeof(float);
  if (smem > 48 * 1024)
    VQ_CUDA_CHECK(
        cudaFuncSetAttribute(sink_partial_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  sink_partial_kernel<<<dim3(p.batch * p.kv_heads, p.queries), kSinkThreads, smem, stream>>>(p);
  VQ_CUDA_CHECK_LAUNCH("sink_partial_kernel");
}

}  // namespace veloxquant::cuda
