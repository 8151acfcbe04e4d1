// The device cache's memory, as plain pointers and strides shared by host planning and the
// kernels (FlashInfer's style: one Params struct per launch, nothing hidden).
//
// Contiguous layout, one region per (sequence b, KV head h), index s = b * kv_heads + h:
//   codes: codes + s * stream_bytes, the CPU codec's bytes for the encoded tokens, in order;
//   ring:  ring + s * ring_tokens * head_dim fp16 values; token t of the residual window sits in
//          row t % ring_tokens (a ring, so appends never move rows; the CPU keeps the same rows
//          oldest first, and download_*() reorders them).
// A stream holds `encoded` tokens in codes and tokens - encoded in the ring. Fp16 caches keep
// every token in `codes` as rows and have no ring.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::cuda {

struct StreamView {
  uint8_t* codes = nullptr;
  size_t stream_bytes = 0;
  uint16_t* ring = nullptr;
  int ring_tokens = 0;
  int block_tokens = 1;  // tokens the codec encodes together (KIVI and QJL keys: group, values: 4)
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

// QJL's keys (qjl/qjl_layout.cuh) for the attention kernel.
struct QjlAttend {
  const float* sketch_t = nullptr;         // S^T: head_dim x proj, row-major (row c: column c of S)
  const uint16_t* sketch_t_f16 = nullptr;  // the same in fp16, each 32 rows as pairs (j, j + 16)
  int group = 32, outliers = 8;            // tokens per key block, outlier channels per block
  // sqrt(channels) * sqrt(pi/2) / sketch bits of the inlier and outlier parts: times a stored RMS,
  // the weight of a token's sign sum in the estimator (the CPU codec's float expression).
  float inlier_scale = 0, outlier_scale = 0;
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
  StreamView keys, values;
  int kivi_group = 32;                        // KIVI: tokens per key block, channels per value group;
                                              // QJL: channels per value group
  const float* key_codebook = nullptr;        // TurboQuant levels
  const float* value_codebook = nullptr;
  const float* key_signs = nullptr;           // TurboQuant key rotation
  const float* key_sketch = nullptr;          // turboquant_prod: S transposed (S^T row-major); else null
  QjlAttend qjl;
  float* part_o = nullptr;  // [batch * q_heads, splits, head_dim]
  float* part_ml = nullptr; // [batch * q_heads, splits, 2]: running max and sum of exponentials
};

struct CombineParams {
  const float* part_o = nullptr;
  const float* part_ml = nullptr;
  int splits = 0, head_dim = 0, q_heads = 0, kv_heads = 0;
  const float* value_signs = nullptr;  // TurboQuant: undo the value rotation after combining
  float* out = nullptr;                // [batch, q_heads, head_dim]
};

}  // namespace veloxquant::cuda
