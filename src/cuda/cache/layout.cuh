// The device cache's memory, as plain pointers and strides shared by host planning and the
// kernels (FlashInfer's style: one Params struct per launch, nothing hidden).
//
// Contiguous layout, one region per (sequence b, KV head h), index s = b * kv_heads + h:
//   codes: codes + s * stream_bytes, the CPU codec's bytes for the encoded tokens, in order;
//   ring:  ring + s * ring_tokens * head_dim fp16 values; token t of the residual window sits in
//          row t % ring_tokens (a ring, so appends never move rows; the CPU keeps the same rows
//          oldest first, and download_*() reorders them).
// A stream holds `encoded` tokens in codes and tokens - encoded in the ring. Fp16 caches keep
// every token in `codes` as rows and have no ring. A windowed layer's codes may wrap: token t's
// block then sits where token t % wrap_tokens's would, over a block no query sees any more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace veloxquant::cuda {

struct StreamView {
  uint8_t* codes = nullptr;
  size_t stream_bytes = 0;
  uint16_t* ring = nullptr;
  int ring_tokens = 0;
  int block_tokens = 1;  // tokens the codec encodes together (KIVI and QJL keys: group, values: 4)
  int wrap_tokens = 0;   // > 0: the codes' span in tokens, a multiple of every block and of 32
  // A state per stream, state_bytes each, that the format fits to the stream's tokens (the CPU
  // codec's CacheStream::state: KVQuant's first token); null when the format keeps none.
  uint8_t* state = nullptr;
  size_t state_bytes = 0;
  // Where token t's codes sit, in tokens from the stream's start.
  __host__ __device__ int slot(int t) const { return wrap_tokens > 0 ? t % wrap_tokens : t; }
};

// The tokens a stream has encoded once it holds `tokens`: whole blocks that have aged out of the
// residual window (the CPU cache's push(): the tail keeps residual..residual+block-1 tokens).
__host__ __device__ inline int encoded_tokens(int tokens, int residual, int block) {
  return tokens < residual + block ? 0 : (tokens - residual) / block * block;
}

struct AppendParams {
  const uint16_t* k = nullptr;      // [batch, kv_heads, n, head_dim] fp16
  const uint16_t* v = nullptr;
  const int64_t* positions = nullptr;  // [batch, n]
  int n = 0, old_tokens = 0, kv_heads = 0, head_dim = 0, residual = 0;
  int rope_half = 0;                 // rotated pairs per head; 0: no RoPE
  const double* inv_freq = nullptr;  // rope_half frequencies, computed on the host like the CPU
  StreamView keys, values;
};

// A device format's own attention arguments (its tables' device pointers, its group sizes) as
// the format's struct T, carried by value in the launch's parameters: the format sets them with
// set(), its kernels read them back with get<T>(). Copied bytewise, so T must be trivially copyable.
struct FormatArgs {
  alignas(16) unsigned char bytes[128] = {};
  template <class T>
  __host__ __device__ void set(const T& t) {
    static_assert(sizeof(T) <= sizeof(bytes) && alignof(T) <= 16, "format arguments too large");
    memcpy(bytes, &t, sizeof(T));
  }
  template <class T>
  __host__ __device__ T get() const {
    static_assert(sizeof(T) <= sizeof(bytes) && alignof(T) <= 16, "format arguments too large");
    T t;
    memcpy(&t, bytes, sizeof(T));
    return t;
  }
};

struct AttendParams {
  const uint16_t* q = nullptr;  // [batch, q_heads, head_dim] fp16
  float scale = 1;
  int kv_heads = 0, group = 1, head_dim = 0;
  int tokens = 0;
  int key_encoded = 0, value_encoded = 0;  // tokens read from codes; the rest from the ring
  int main_tiles = 0;       // 32-token tiles of the fused region [0, main_tiles * 32)
  int main_end = 0;         // tokens of the fused region that exist (masking its last tile)
  int tiles_per_split = 0;  // a multiple of the block's warps
  int main_splits = 0;      // splits over the fused region; splits - main_splits (0 or 1) ring splits come first
  int splits = 0;
  int queries = 1;          // > 1: a prompt's causal queries, one per blockIdx.z (for_query())
  // A sliding-window layer's attention (Gemma's, Mistral's): a query sees only its newest `window`
  // tokens (0: all), from window_start (for_query() sets it per query). first_tile: the fused
  // region's first tile any query of the launch sees, where the splits start.
  int window = 0, window_start = 0, first_tile = 0;
  float softcap = 0;  // > 0: each score s becomes softcap * tanh(s / softcap) before the softmax
  StreamView keys, values;
  FormatArgs format;        // the device format's own (cache/device_format.h)
  float* part_o = nullptr;  // [batch * q_heads, splits, head_dim]
  float* part_ml = nullptr; // [batch * q_heads, splits, 2]: running max and sum of exponentials
};

struct CombineParams {
  const float* part_o = nullptr;
  const float* part_ml = nullptr;
  int splits = 0, head_dim = 0, q_heads = 0, kv_heads = 0;
  const float* value_signs = nullptr;   // a value rotation to undo after combining (TurboQuant): signs,
  const float* value_matrix = nullptr;  // or a dense matrix R (row-major; the combine applies R^T); else null
  // An evicting cache's sinks: per query head one more partial, [head_dim + 2] (unnormalized
  // output in natural channel order, then max and sum), merged after the rotation; else null.
  const float* sinks = nullptr;
  float* out = nullptr;                // [batch, q_heads, head_dim]
};

}  // namespace veloxquant::cuda
