// Reading the rows an append brings: channel c of token t (0 <= t < n) of one (sequence, KV head),
// keys after RoPE. The CPU cache stores every appended row in fp16 before encoding it (its
// residual tail), so the value returned is that fp16 rounding, as a float: the codecs of both
// backends see the same inputs.
#pragma once

#include <cuda_fp16.h>

#include "cuda/cache/layout.cuh"
#include "cuda/common/device_math.cuh"

namespace veloxquant::cuda {

__device__ inline float appended_value(const AppendParams& p, const uint16_t* rows, bool rope,
                                       int seq, int t, int c) {
  const __half* row = reinterpret_cast<const __half*>(rows) + (static_cast<size_t>(seq) * p.n + t) * p.head_dim;
  const int pair = c / 2;
  if (!rope || pair >= p.rope_half) return __half2float(row[c]);
  float x0 = __half2float(row[2 * pair]), x1 = __half2float(row[2 * pair + 1]);
  const int b = seq / p.kv_heads;
  rope_pair(x0, x1, p.inv_freq[pair], p.positions[static_cast<size_t>(b) * p.n + t]);
  return __half2float(__float2half_rn(c % 2 == 0 ? x0 : x1));
}

}  // namespace veloxquant::cuda
