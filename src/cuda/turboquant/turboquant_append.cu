// TurboQuant-MSE quantize-on-append: one block per (appended token, sequence x KV head, stream),
// one thread per coordinate, one launch per layer step. Each step repeats the CPU codec's float
// operations in its order (turboquant/rotated_table_codec.cpp): the norm summed in double from
// coordinate 0 up, signs, the Walsh-Hadamard butterflies stage by stage, the 1/sqrt(d) scale,
// the 1/norm scale, then the count of codebook boundaries <= y; so the records match bytewise.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"

namespace veloxquant::cuda {
namespace {

__global__ void turboquant_append_kernel(AppendParams p, int bits, TurboQuantDevice tq) {
  extern __shared__ float y[];  // head_dim floats, then head_dim codes
  auto* codes = reinterpret_cast<uint8_t*>(y + p.head_dim);
  __shared__ float norm_s;
  const int d = p.head_dim, c = threadIdx.x, t = blockIdx.x, seq = blockIdx.y;
  const bool key = blockIdx.z == 0;
  const StreamView& s = key ? p.keys : p.values;
  y[c] = appended_value(p, key ? p.k : p.v, key, seq, t, c);
  __syncthreads();
  if (c == 0) {
    double sum = 0;
    for (int i = 0; i < d; ++i) sum = __dadd_rn(sum, __dmul_rn(static_cast<double>(y[i]), static_cast<double>(y[i])));
    norm_s = static_cast<float>(sqrt(sum));
  }
  __syncthreads();
  const float norm = norm_s;
  float v = 0;
  if (norm != 0) {
    y[c] = __fmul_rn(y[c], (key ? tq.key_signs : tq.value_signs)[c]);
    __syncthreads();
    for (int len = 1; len < d; len <<= 1) {
      float mine = 0;
      const int a = c / (2 * len) * 2 * len + c % len;  // the pair (a, a + len) thread c sits in
      if (c == a) mine = __fadd_rn(y[a], y[a + len]);
      else mine = __fsub_rn(y[a], y[a + len]);
      __syncthreads();
      y[c] = mine;
      __syncthreads();
    }
    v = __fmul_rn(__fmul_rn(y[c], tq.hadamard_scale), __fdiv_rn(1.0f, norm));
  }
  const float* bounds = key ? tq.key_boundaries : tq.value_boundaries;
  unsigned code = 0;
  for (int i = 0; i < (1 << bits) - 1; ++i) code += bounds[i] <= v ? 1u : 0u;
  codes[c] = static_cast<uint8_t>(code);
  __syncthreads();
  // Record [f32 norm][codes packed little-endian, code i at bits [i * bits, (i + 1) * bits)].
  const int record = 4 + d * bits / 8;
  uint8_t* out = s.codes + seq * s.stream_bytes + static_cast<size_t>(p.old_tokens + t) * record;
  if (c == 0) *reinterpret_cast<float*>(out) = norm;
  for (int byte = c; byte < d * bits / 8; byte += d) {
    unsigned acc = 0;
    for (int b = 0; b < 8; ++b) {
      const int bit = byte * 8 + b;
      acc |= ((codes[bit / bits] >> (bit % bits)) & 1u) << b;
    }
    out[4 + byte] = static_cast<uint8_t>(acc);
  }
}

}  // namespace

void launch_turboquant_append(const AppendParams& p, int batch, int bits, const TurboQuantDevice& t,
                              cudaStream_t stream) {
  const size_t bytes = p.head_dim * (sizeof(float) + 1);
  turboquant_append_kernel<<<dim3(p.n, batch * p.kv_heads, 2), p.head_dim, bytes, stream>>>(p, bits, t);
  VQ_CUDA_CHECK_LAUNCH("turboquant_append_kernel");
}

}  // namespace veloxquant::cuda
