// Scoring tokens by table lookups, shared by VecInfer's ADC and RaBitQ's sign codes: a block's
// tables are [bytes][entries][padded group] floats in shared memory (entry e of byte position s
// holds, for each query head of the KV head's group, what a token whose byte s is e adds to its
// score), and a token's scores are the sums of one entry per byte of its record, one thread per
// token, the group's sums in registers so each record byte is read once for all of them. The
// group's values sit side by side so one 16-byte load fetches four heads: random entries conflict
// in shared-memory banks whatever the layout, and this way a token makes a quarter of the requests.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "veloxquant/cuda_vq.h"

namespace veloxquant::cuda {

inline constexpr int kMaxScoreGroup = 8;   // query heads per KV head the scorers are built for
inline constexpr int kScoreThreads = 512;  // one token per thread; also builds the tables

// The group padded to whole 16-byte loads.
__host__ __device__ constexpr int padded_group(int g) { return (g + 3) / 4 * 4; }

// sums[g] += table[s][record[s]][g] for s < bytes, in order of s (the CPU codecs' order),
// without contraction, so the sums are the CPU's to the bit when the tables are.
template <int G>
__device__ inline void add_lookups(const float4* table, int bytes, int entries, const uint8_t* record,
                                   float (&sums)[G]) {
  constexpr int kLoads = padded_group(G) / 4;
  for (int s = 0; s < bytes; ++s) {
    const float4* at = table + (s * entries + __ldg(record + s)) * kLoads;
#pragma unroll
    for (int v = 0; v < kLoads; ++v) {
      const float4 x = at[v];
      const float four[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (4 * v + k < G) sums[4 * v + k] = __fadd_rn(sums[4 * v + k], four[k]);
    }
  }
}

// Copies `floats` floats from global to shared memory, the block's threads side by side.
__device__ inline void stage(float* smem, const float* gmem, int floats) {
  for (int i = threadIdx.x; i < floats; i += blockDim.x) smem[i] = __ldg(gmem + i);
}

// The tokens block `split` of `splits` scores along one KV head's stream: [first, last).
__device__ inline void split_range(size_t tokens, int split, int splits, size_t& first, size_t& last) {
  const size_t per = (tokens + splits - 1) / splits;
  first = per * split;
  last = first + per < tokens ? first + per : tokens;
}

// Host side. Throws Error naming `what` and the value when the group is not 1..8, the shape is
// empty, or `smem` bytes of tables do not fit one block.
void check_score_shape(const ScoreShape& shape, size_t smem, const char* what);
// Raises `kernel`'s shared-memory limit to `smem` and returns how many splits along the tokens
// each KV head gets: one block per multiprocessor in one wave (the tables take most of a
// multiprocessor's shared memory, so a second block would wait for a whole second wave), none
// with fewer tokens than a block has threads.
int score_splits(const void* kernel, size_t smem, const ScoreShape& shape);

}  // namespace veloxquant::cuda
