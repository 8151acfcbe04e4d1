// Appending to an fp16 cache: keys rotated (RoPE) and stored as fp16 rows, values copied. This is
// also the "plain fp16 store" the quantizing appends are timed against.
#include "cuda/fp16/fp16_launch.h"
#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"

namespace veloxquant::cuda {
namespace {

__global__ void fp16_append_kernel(AppendParams p) {
  const int t = blockIdx.x, seq = blockIdx.y, c = threadIdx.x;
  const size_t row = static_cast<size_t>(p.keys.slot(p.old_tokens + t)) * p.head_dim + c;
  auto* k = reinterpret_cast<__half*>(p.keys.codes + seq * p.keys.stream_bytes);
  auto* v = reinterpret_cast<__half*>(p.values.codes + seq * p.values.stream_bytes);
  k[row] = __float2half_rn(appended_value(p, p.k, true, seq, t, c));
  v[row] = reinterpret_cast<const __half*>(p.v)[(static_cast<size_t>(seq) * p.n + t) * p.head_dim + c];
}

}  // namespace

void launch_fp16_append(const AppendParams& p, int batch, cudaStream_t stream) {
  fp16_append_kernel<<<dim3(p.n, batch * p.kv_heads), p.head_dim, 0, stream>>>(p);
  VQ_CUDA_CHECK_LAUNCH("fp16_append_kernel");
}

}  // namespace veloxquant::cuda
