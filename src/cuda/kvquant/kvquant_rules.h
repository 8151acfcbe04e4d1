// KVQuant's NUQ cache on the GPU: the tables its CPU form loads from the calibration artifact
// (codecs/kvquant/kvquant_method.cpp), the records (the CPU codec's, codecs/kvquant/kvquant_codec.h)
// and what the kernels run; kvquant_format.cu refuses the rest. Plain C++.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// Every KV head's calibrated tables, side by side, and the sparse part's settings.
struct KvquantTables : FormatTables {
  size_t outliers = 0;                          // sparse entries per vector
  bool sink = true;                             // each stream's first token kept exact
  std::vector<float> key_levels, value_levels;  // [kv_heads][2^bits], ascending in [-1, 1]
  std::vector<float> key_lo, key_hi;            // [kv_heads][head_dim]: the keys' channel ranges
};

// One token's record: [values: fp16 lo, hi] codes of `bits` bits (LSB first) then `slots` pairs
// (u16 index, fp16 value); a first slot of 0xFFFF marks a token equal to the stream's first.
struct KvquantRecord {
  size_t dim = 0, bits = 0, outliers = 0;
  bool sink = false, per_token = false;  // per_token: values (their own range leads the record)
  size_t slots() const { return sink ? std::max<size_t>(outliers, 1) : outliers; }
  size_t codes_offset() const { return per_token ? 4 : 0; }
  size_t slots_offset() const { return codes_offset() + (dim * bits + 7) / 8; }
  size_t bytes() const { return slots_offset() + 4 * slots(); }
};

// The attention block's shared memory with `stages` buffers of records per warp: the warps'
// probabilities, the tables (key channel ranges, both level sets, the RoPE frequencies, the first
// token's rows), and per warp one decoded fp16 tile (keys, then values) plus the record stages
// (kvquant_attention.cu lays it out so).
inline size_t kvquant_attention_smem(size_t head_dim, size_t key_record, size_t value_record, int stages) {
  constexpr size_t kWarps = 4, kPtFloats = 8 * 48, kTile = 32;
  const size_t tables = 4 * (kWarps * kPtFloats + 2 * head_dim + 2 * 256) + 8 * (head_dim / 2) +
                        2 * 2 * head_dim;
  const size_t stage = kTile * (key_record + value_record) + 16;
  const size_t per_warp = kTile * head_dim * 2 + static_cast<size_t>(stages) * stage;
  const size_t epilogue = 4 * kWarps * 8 * (head_dim + 2);
  return (tables + 15) / 16 * 16 + std::max(kWarps * per_warp, epilogue);
}
// Two record stages per warp where they fit (the next tile's copies overlap this one's decode).
inline int kvquant_stages(size_t head_dim, const KvquantRecord& keys, const KvquantRecord& values) {
  return kvquant_attention_smem(head_dim, keys.bytes(), values.bytes(), 2) <= kMaxSharedMemoryPerBlock ? 2
                                                                                                       : 1;
}

inline KvquantRecord kvquant_record(const CacheConfig& c, size_t outliers, bool sink, bool per_token) {
  return {c.head_dim, c.bits, outliers, sink, per_token};
}

// What the kernels need of the settings, before any table is loaded.
inline std::string kvquant_shape_problem(const CacheConfig& c, size_t outliers, bool sink) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (c.bits < 2 || c.bits > 8) return "kvquant_nuq bits " + n(c.bits) + "; expected 2..8";
  if (outliers >= c.head_dim)
    return "kvquant_nuq outliers " + n(outliers) + " per vector; expected fewer than head_dim " +
           n(c.head_dim);
  const KvquantRecord k = kvquant_record(c, outliers, sink, false),
                      v = kvquant_record(c, outliers, sink, true);
  const size_t smem = kvquant_attention_smem(c.head_dim, k.bytes(), v.bytes(), 1);
  if (smem > kMaxSharedMemoryPerBlock)
    return "kvquant_nuq head_dim " + n(c.head_dim) + " with " + n(outliers) +
           " sparse entries per vector: an attention block's tiles and records take " + n(smem) +
           " bytes of shared memory; expected at most " + n(kMaxSharedMemoryPerBlock) +
           " (a smaller outliers= fits)";
  return {};
}

inline std::string kvquant_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  const KvquantTables* t = tables_of<KvquantTables>(c);
  if (t == nullptr) return "kvquant_nuq without its tables; expected KvquantTables (the calibration's)";
  if (std::string p = kvquant_shape_problem(c, t->outliers, t->sink); !p.empty()) return p;
  const size_t levels = c.kv_heads << c.bits, channels = c.kv_heads * c.head_dim;
  if (t->key_levels.size() != levels || t->value_levels.size() != levels || t->key_lo.size() != channels ||
      t->key_hi.size() != channels)
    return "kvquant_nuq tables of " + n(t->key_levels.size()) + " key and " + n(t->value_levels.size()) +
           " value levels and " + n(t->key_lo.size()) + " key ranges; expected " + n(levels) + ", " +
           n(levels) + " and " + n(channels) + " (every KV head's)";
  return {};
}

}  // namespace veloxquant::cuda
