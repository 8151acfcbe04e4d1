// The attention an evicting cache's sinks get (streaming_llm): one more partial (max, sum,
// unnormalized output) per query head beside the quantizer's splits, merged by the combine after
// it has undone any value rotation, since sinks are plain fp16 rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace veloxquant::cuda {

struct SinkParams {
  const uint16_t* q = nullptr;       // [queries, batch, q_heads, head_dim] fp16
  const uint16_t* keys = nullptr;    // [streams, stride, head_dim] fp16, before RoPE
  const uint16_t* values = nullptr;  // likewise
  int stride = 0, held = 0;          // rows per stream; sinks held (the sequence's first tokens)
  int batch = 1, kv_heads = 1, group = 1, head_dim = 0, queries = 1;
  int tokens = 0;              // tokens the cache has taken: query z is token tokens - queries + z
  int64_t first_position = 0;  // sink i is turned to this + i
  int rope_half = 0;           // rotated pairs (interleaved); 0: none
  const double* inv_freq = nullptr;
  float scale = 1, softcap = 0;
  float* out = nullptr;  // [queries * batch * q_heads, head_dim + 2]: output, then max and sum
};

void launch_sink_partial(const SinkParams& p, cudaStream_t stream);

}  // namespace veloxquant::cuda
