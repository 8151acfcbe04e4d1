// What every split-decode attention kernel shares (flash-decoding). A block of kWarps warps takes
// one split of the sequence of one (sequence, KV head) and every query head of its group. Each
// warp streams its own 32-token tiles (tile = first + warp, + kWarps, ...), double-buffered with
// cp.async, keeping a running max, sum and output per head (online softmax); at the end the warps
// merge through shared memory and the block writes one partial (max, sum, output) per head.
// combine.cu merges the splits.
#pragma once

#include <cuda_fp16.h>

#include <cmath>

#include "cuda/cache/layout.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"

namespace veloxquant::cuda {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarp;
inline constexpr int kTileTokens = 32;  // tokens a warp takes at a time (two m16 halves)
// Fewest tiles a split of the compressed part takes (1024 tokens): with one stream (the head_dim-128
// model's single KV head at batch 1) two waves of blocks would cut 128k tokens into splits of 128,
// each paying its fixed work for little reading. The sweep behind 32 is in docs/cuda.md.
inline constexpr int kMinSplitTiles = 32;

// Shared memory the block's epilogue uses: every warp's outputs [kWarps][MAXG][dim] and states.
template <int MAXG>
__host__ __device__ constexpr size_t epilogue_bytes(int dim) {
  return sizeof(float) * kWarps * MAXG * (dim + 2);
}

// The epilogue. `o` holds each warp's unnormalized output per head in natural channel order
// ([kWarps][MAXG][dim]) and `ml` each warp's (max, sum) per head ([kWarps][MAXG][2]), both written
// by the kernel before this call; the block merges its warps into one partial per head.
template <int MAXG>
__device__ void write_partial(const AttendParams& p, const float* o, const float* ml, int seq,
                              int split) {
  __syncthreads();
  const int d = p.head_dim, b = seq / p.kv_heads, kvh = seq % p.kv_heads;
  const int q_heads = p.kv_heads * p.group;
  for (int i = threadIdx.x; i < p.group * d; i += kThreads) {
    const int h = i / d, c = i % d;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ml[(w * MAXG + h) * 2]);
    float sum = 0, out = 0;
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float f = __expf(ml[(w * MAXG + h) * 2] - mx);
        sum += f * ml[(w * MAXG + h) * 2 + 1];
        out += f * o[(w * MAXG + h) * d + c];
      }
    }
    const size_t row = static_cast<size_t>(b) * q_heads + kvh * p.group + h;
    p.part_o[(row * p.splits + split) * d + c] = out;
    if (c == 0) p.part_ml[(row * p.splits + split) * 2] = mx, p.part_ml[(row * p.splits + split) * 2 + 1] = sum;
  }
}

// The launch's parameters as query blockIdx.z of a prompt sees them (DeviceCache::attend_causal):
// query z of `queries` sees the first tokens - queries + z + 1 tokens of its sequence, so the
// fused region and the ring end there; its query rows and partials lie z x batch x q_heads rows
// further on (gridDim.y is batch x KV heads: queries are the outer index, sequences the inner).
// Splits past its end find no tile and write empty partials (max -inf), which the combine skips.
// A windowed layer's query sees its newest `window` tokens only: window_start is its first (an
// evicting cache's: the oldest token kept, for every query).
__device__ inline AttendParams for_query(AttendParams p) {
  if (p.queries > 1) {
    const int z = static_cast<int>(blockIdx.z);
    p.tokens = max(0, p.tokens - p.queries + 1 + z);  // 0: the query is a sink, before every stream token
    p.key_encoded = min(p.key_encoded, p.tokens);
    p.value_encoded = min(p.value_encoded, p.tokens);
    p.main_end = p.key_encoded;
    p.main_tiles = (p.main_end + kTileTokens - 1) / kTileTokens;
    const size_t rows = static_cast<size_t>(z) * gridDim.y * p.group;
    p.q += rows * p.head_dim;
    p.part_o += rows * p.splits * p.head_dim;
    p.part_ml += rows * p.splits * 2;
  }
  if (p.window > 0) p.window_start = max(0, p.tokens - p.window);
  return p;
}

// The group's queries as f32, times the softmax scale, into q_s [MAXG][dim] (block-wide).
template <int MAXG>
__device__ void load_queries(const AttendParams& p, int seq, float* q_s) {
  const int d = p.head_dim, b = seq / p.kv_heads, kvh = seq % p.kv_heads;
  const __half* q = reinterpret_cast<const __half*>(p.q) +
                    (static_cast<size_t>(b) * p.kv_heads * p.group + kvh * p.group) * d;
  for (int i = threadIdx.x; i < MAXG * d; i += kThreads)
    q_s[i] = i < p.group * d ? __half2float(q[i]) * p.scale : 0.0f;
}

// The tiles of the fused region this block's split covers: [first, last). Splits start at the
// launch's first visible tile; a later query of a windowed prompt skips the tiles before its own.
__device__ inline void split_tiles(const AttendParams& p, int split, int& first, int& last) {
  first = p.first_tile + split * p.tiles_per_split;
  last = min(first + p.tiles_per_split, p.main_tiles);
  first = max(first, p.window_start / kTileTokens);
}

// This warp's tiles of the block's split (tile = first + warp, + kWarps, ...), in S buffers:
// fetch(buffer, tile) starts a tile's cp.async copies, body(buffer, tile) runs once they have
// landed. With two, the next tile's copies are in flight while body runs; one buffer (a head too
// wide for two in shared memory) waits for each tile's copies.
template <int S, class Buffer, class Fetch, class Body>
__device__ void for_each_tile(const AttendParams& p, int split, Buffer (&buf)[S], Fetch&& fetch,
                              Body&& body) {
  static_assert(S == 1 || S == 2, "one or two buffers");
  int first, last;
  split_tiles(p, split, first, last);
  int tile = first + static_cast<int>(threadIdx.x) / kWarp;
  if constexpr (S == 1) {
    for (; tile < last; tile += kWarps) {
      fetch(buf[0], tile);
      async_commit();
      async_wait<0>();
      __syncwarp();
      body(buf[0], tile);
      __syncwarp();  // every lane is done with the buffer before the next tile's copies
    }
  } else {
    if (tile < last) fetch(buf[0], tile);
    async_commit();
    for (int k = 0; tile < last; ++k, tile += kWarps) {
      if (tile + kWarps < last) fetch(buf[(k + 1) & 1], tile + kWarps);
      async_commit();
      async_wait<1>();
      __syncwarp();
      body(buf[k & 1], tile);
    }
  }
}

}  // namespace veloxquant::cuda
