// VecInfer on the GPU: the tables its CPU form loads from the calibration artifact
// (codecs/vecinfer/vecinfer_cuda.cpp) and what the kernels run; vecinfer_format.cu refuses the
// rest. Plain C++.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"
#include "cuda/turboquant/turboquant_rules.h"

namespace veloxquant::cuda {

// Keys: y = R (k / lambda) cut into head_dim / dims sub-vectors, each stored as the u8 index of
// its nearest centroid (codecs/vecinfer/vecinfer_key_codec.h). Values: turboquant_mse at c.bits.
struct VecinferTables : FormatTables {
  size_t dims = 0, centroids = 0;
  std::vector<float> key_signs, key_rotation;  // the key rotation: Hadamard signs, or a dense matrix
  std::vector<float> smooth;                   // lambda, [kv_heads][head_dim]
  std::vector<float> codebooks;                // fp16 values, [kv_heads][head_dim / dims][centroids][dims]
  TurboQuantTables values;                     // the value side only (its key fields are empty)
};

// What an attention block holds in shared memory for the largest query group (8): the group's
// queries, the value level pairs, the warps' probabilities, the score table (one fp16 pair of
// query heads per 4 bytes, for every sub-space and centroid) and the warps' tiles: fp16 value
// rows and two stages of records. The kernel (vecinfer_attention.cu) lays it out the same way.
inline size_t vecinfer_lut_words(size_t subspaces, size_t centroids, size_t group) {
  return (subspaces * centroids * (group / 2) + 3) / 4 * 4;
}
inline size_t vecinfer_stage_bytes(size_t head_dim, unsigned bits, size_t subspaces) {
  return 32 * (subspaces + turboquant_value_record(head_dim, bits)) + 16;
}
inline size_t vecinfer_attention_smem(size_t head_dim, unsigned bits, size_t subspaces, size_t centroids,
                                      size_t group) {
  constexpr size_t kWarps = 4, kPtFloats = 8 * 48;
  const size_t tiles = kWarps * (32 * head_dim * 2 + 2 * vecinfer_stage_bytes(head_dim, bits, subspaces));
  const size_t epilogue = 4 * kWarps * 8 * (head_dim + 2);
  return 4 * (group * head_dim + (size_t{1} << (2 * bits)) + kWarps * kPtFloats +
              vecinfer_lut_words(subspaces, centroids, group)) +
         std::max(tiles, epilogue);
}

// What the kernels need of the shape and the product-VQ settings, before any table is loaded.
inline std::string vecinfer_shape_problem(const CacheConfig& c, size_t dims, size_t centroids) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (!turboquant_bits_supported(c.bits)) return "vecinfer vbits " + n(c.bits) + "; expected 2, 3 or 4";
  if (dims < 1 || c.head_dim % dims != 0 || centroids < 1 || centroids > 256)
    return "vecinfer dims " + n(dims) + " and centroids " + n(centroids) +
           "; expected dims dividing head_dim and 1..256 centroids";
  const size_t smem = vecinfer_attention_smem(c.head_dim, c.bits, c.head_dim / dims, centroids, 8);
  if (smem > kMaxSharedMemoryPerBlock)
    return "vecinfer head_dim " + n(c.head_dim) + " with dims=" + n(dims) + " and centroids=" + n(centroids) +
           ": an attention block's score table and tiles take " + n(smem) +
           " bytes of shared memory; "
           "expected at most " +
           n(kMaxSharedMemoryPerBlock) + " (longer sub-vectors or fewer centroids fit)";
  return {};
}

inline std::string vecinfer_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  const VecinferTables* t = tables_of<VecinferTables>(c);
  if (t == nullptr) return "vecinfer without its tables; expected VecinferTables (the calibration's)";
  if (std::string p = vecinfer_shape_problem(c, t->dims, t->centroids); !p.empty()) return p;
  const size_t d = c.head_dim;
  const bool hadamard = (d & (d - 1)) == 0;
  if (t->key_signs.size() != (hadamard ? d : 0) || t->key_rotation.size() != (hadamard ? 0 : d * d))
    return "vecinfer key rotation of " + n(t->key_signs.size()) + " signs and " + n(t->key_rotation.size()) +
           " matrix values; expected " +
           (hadamard ? "head_dim signs" : std::string("a head_dim x head_dim matrix"));
  if (t->smooth.size() != c.kv_heads * d || t->codebooks.size() != c.kv_heads * d * t->centroids)
    return "vecinfer tables of " + n(t->smooth.size()) + " smoothing factors and " + n(t->codebooks.size()) +
           " codebook values; expected " + n(c.kv_heads * d) + " and " + n(c.kv_heads * d * t->centroids) +
           " (every KV head's)";
  const size_t levels = size_t{1} << c.bits;
  const TurboQuantTables& v = t->values;
  if (v.value_centroids.size() != levels || v.value_boundaries.size() != levels - 1 ||
      v.value_signs.size() != (hadamard ? d : 0) || v.value_rotation.size() != (hadamard ? 0 : d * d))
    return "vecinfer value tables of " + n(v.value_centroids.size()) +
           " levels; expected turboquant_mse's at " + n(c.bits) + " bits with the layer's value rotation";
  return {};
}

}  // namespace veloxquant::cuda
