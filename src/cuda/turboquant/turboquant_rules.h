// TurboQuant on the GPU (turboquant_mse, turboquant_prod): the tables its CPU form derives
// (codecs/turboquant/turboquant_cuda.cpp) and what the kernels run; turboquant_format.cu refuses
// the rest. Plain C++.
#pragma once

#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// What TurboQuant's codecs derive from the layer's seed on the CPU (core/rotation.h,
// core/lloyd_max.h): the random signs of each stream's Hadamard rotation and its Lloyd-Max
// codebook, and turboquant_prod's sketch.
struct TurboQuantTables : FormatTables {
  std::vector<float> key_signs, value_signs;              // head_dim values of +1 or -1
  std::vector<float> key_centroids, value_centroids;      // 2^bits ascending levels (prod keys: 2^(bits-1))
  std::vector<float> key_boundaries, value_boundaries;    // one fewer ascending midpoints
  std::vector<float> key_sketch;  // prod: S, head_dim x head_dim row-major; empty for MSE
};

// The bit widths the kernels run: 2, 3 or 4 (prod keys: one of them is the residual's sign).
inline bool turboquant_bits_supported(unsigned bits) { return bits >= 2 && bits <= 4; }

inline std::string turboquant_problem(const CacheConfig& c, bool prod) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (!turboquant_bits_supported(c.bits)) return "turboquant bits " + n(c.bits) + "; expected 2, 3 or 4";
  if (std::string p = hadamard_head_dim_problem("turboquant", c); !p.empty()) return p;
  const TurboQuantTables* t = tables_of<TurboQuantTables>(c);
  if (t == nullptr) return "turboquant without its tables; expected TurboQuantTables (signs and codebooks)";
  const size_t levels = size_t{1} << c.bits, key_levels = prod ? levels / 2 : levels;
  if (t->key_signs.size() != c.head_dim || t->value_signs.size() != c.head_dim)
    return "turboquant signs: " + n(t->key_signs.size()) + " and " + n(t->value_signs.size()) +
           "; expected head_dim each";
  if (t->key_centroids.size() != key_levels || t->value_centroids.size() != levels ||
      t->key_boundaries.size() != key_levels - 1 || t->value_boundaries.size() != levels - 1)
    return "turboquant codebooks: " + n(t->key_centroids.size()) + " key and " + n(t->value_centroids.size()) +
           " value levels; expected " + n(key_levels) + " and " + n(levels) + ", with one boundary fewer each";
  if (t->key_sketch.size() != (prod ? c.head_dim * c.head_dim : 0))
    return "turboquant key sketch of " + n(t->key_sketch.size()) + " values; expected " +
           (prod ? "head_dim x head_dim" : std::string("none for turboquant_mse"));
  return {};
}

}  // namespace veloxquant::cuda
