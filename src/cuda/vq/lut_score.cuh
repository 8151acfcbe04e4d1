// Scoring tokens by table lookups, shared by VecInfer's ADC and RaBitQ's sign codes: each query
// head's table is [bytes][entries] floats in shared memory (entry e of byte position s is what a
// token whose byte s holds e adds to the score), and a token's score for every query head of the
// group is the sum of one lookup per byte of its record, one thread per token, the group's sums
// in registers so each record byte is read once for all of them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "veloxquant/cuda_vq.h"

namespace veloxquant::cuda {

inline constexpr int kMaxScoreGroup = 8;   // query heads per KV head the scorers are built for
inline constexpr int kScoreThreads = 512;  // one token per thread; also builds the tables

// sums[g] += table[g][s][record[s]] for s < bytes, in order of s (the CPU codecs' order),
// without contraction, so the sums are the CPU's to the bit when the tables are.
template <int G>
__device__ inline void add_lookups(const float* table, int bytes, int entries, const uint8_t* record,
                                   float (&sums)[G]) {
  for (int s = 0; s < bytes; ++s) {
    const int e = __ldg(record + s);
#pragma unroll
    for (int g = 0; g < G; ++g) sums[g] = __fadd_rn(sums[g], table[(g * bytes + s) * entries + e]);
  }
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
// each KV head gets: enough blocks to cover every multiprocessor once (the tables take most of
// a multiprocessor's shared memory), none with fewer tokens than a block has threads.
int score_splits(const void* kernel, size_t smem, const ScoreShape& shape);

}  // namespace veloxquant::cuda
