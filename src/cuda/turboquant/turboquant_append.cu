// TurboQuant-MSE quantize-on-append: one block per (appended token, sequence x KV head, stream),
// one thread per coordinate, one launch per layer step. Each step repeats the CPU codec's float
// operations in its order (turboquant/rotated_table_codec.cpp): the norm summed in double from
// coordinate 0 up, signs, the Walsh-Hadamard butterflies stage by stage (in registers and warp
// shuffles while a pair sits inside one warp), the 1/sqrt(d) scale,
// the 1/norm scale, then the count of codebook boundaries <= y; so the records match bytewise.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"

namespace veloxquant::cuda {
namespace {

__global__ void turboquant_append_kernel(AppendParams p, int bits, TurboQuantDevice tq) {
  extern __shared__ double squares[];  // head_dim doubles, then head_dim floats, then head_dim codes
  float* y = reinterpret_cast<float*>(squares + p.head_dim);
  auto* codes = reinterpret_cast<uint8_t*>(y + p.head_dim);
  __shared__ float norm_s;
  const int d = p.head_dim, c = threadIdx.x, t = blockIdx.x, seq = blockIdx.y;
  const bool key = blockIdx.z == 0;
  const StreamView& s = key ? p.keys : p.values;
  float v = appended_value(p, key ? p.k : p.v, key, seq, t, c);
  // The squares are exact in double, so only the sum's order matters: one thread adds them up
  // from coordinate 0, as the CPU does.
  squares[c] = __dmul_rn(static_cast<double>(v), static_cast<double>(v));
  __syncthreads();
  if (c == 0) {
    double sum = 0;
    for (int i = 0; i < d; ++i) sum = __dadd_rn(sum, squares[i]);
    norm_s = static_cast<float>(sqrt(sum));
  }
  __syncthreads();
  const float norm = norm_s;
  if (norm != 0) {
    // Butterfly stage `len`: the lower coordinate of each pair (a, a + len) becomes y[a] + y[a + len],
    // the upper y[a] - y[a + len]. Pairs closer than a warp trade through shuffles, the rest
    // through shared memory.
    v = __fmul_rn(v, (key ? tq.key_signs : tq.value_signs)[c]);
    for (int len = 1; len < d; len <<= 1) {
      float partner;
      if (len < kWarp) {
        partner = __shfl_xor_sync(0xffffffffu, v, len);
      } else {
        y[c] = v;
        __syncthreads();
        partner = y[c ^ len];
        __syncthreads();
      }
      v = (c & len) ? __fsub_rn(partner, v) : __fadd_rn(v, partner);
    }
    v = __fmul_rn(__fmul_rn(v, tq.hadamard_scale), __fdiv_rn(1.0f, norm));
  } else {
    v = 0;
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
  const size_t bytes = p.head_dim * (sizeof(double) + sizeof(float) + 1);
  turboquant_append_kernel<<<dim3(p.n, batch * p.kv_heads, 2), p.head_dim, bytes, stream>>>(p, bits, t);
  VQ_CUDA_CHECK_LAUNCH("turboquant_append_kernel");
}

}  // namespace veloxquant::cuda
