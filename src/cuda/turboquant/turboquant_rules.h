// TurboQuant on the GPU (turboquant_mse, turboquant_prod): the tables its CPU form derives
// (codecs/turboquant/turboquant_cuda.cpp) and what the kernels run; turboquant_format.cu refuses
// the rest. Plain C++.
#pragma once

#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// What TurboQuant's codecs derive from the layer's seed on the CPU (core/rotation.h,
// core/lloyd_max.h): each stream's rotation (the random signs of a Hadamard rotation where
// head_dim is a power of two, a dense orthogonal matrix otherwise) and Lloyd-Max codebook, and
// turboquant_prod's sketch.
struct TurboQuantTables : FormatTables {
  std::vector<float> key_signs, value_signs;              // head_dim values of +1 or -1, or empty
  std::vector<float> key_rotation, value_rotation;        // head_dim x head_dim row-major, or empty
  std::vector<float> key_centroids, value_centroids;      // 2^bits ascending levels (prod keys: 2^(bits-1))
  std::vector<float> key_boundaries, value_boundaries;    // one fewer ascending midpoints
  std::vector<float> key_sketch;  // prod: S, head_dim x head_dim row-major; empty for MSE
};

// The bit widths the kernels run: 2, 3 or 4 (prod keys: one of them is the residual's sign).
inline bool turboquant_bits_supported(unsigned bits) { return bits >= 2 && bits <= 4; }

// Bytes of a key record (prod: two norms, bits - 1 code bits and a sign per channel; else a norm
// and the codes) and of a value record.
inline size_t turboquant_key_record(size_t head_dim, unsigned bits, bool prod) {
  return prod ? 8 + head_dim * (bits - 1) / 8 + head_dim / 8 : 4 + head_dim * bits / 8;
}
inline size_t turboquant_value_record(size_t head_dim, unsigned bits) { return 4 + head_dim * bits / 8; }

// What the kernels need of the shape alone (before any table is derived).
inline std::string turboquant_shape_problem(const CacheConfig& c, bool prod) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (!turboquant_bits_supported(c.bits)) return "turboquant bits " + n(c.bits) + "; expected 2, 3 or 4";
  // The kernels read the records a 32-bit word at a time: 80 channels at 3 bits make 34 bytes.
  const size_t key = turboquant_key_record(c.head_dim, c.bits, prod),
               value = turboquant_value_record(c.head_dim, c.bits);
  if (key % 4 != 0 || value % 4 != 0)
    return "turboquant head_dim " + n(c.head_dim) + " at " + n(c.bits) + " bits: records of " + n(key) +
           " and " + n(value) + " bytes; expected multiples of 4 (at head_dim 80, 2 or 4 bits)";
  return {};
}

inline std::string turboquant_problem(const CacheConfig& c, bool prod) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (std::string p = turboquant_shape_problem(c, prod); !p.empty()) return p;
  const TurboQuantTables* t = tables_of<TurboQuantTables>(c);
  if (t == nullptr)
    return "turboquant without its tables; expected TurboQuantTables (rotations and codebooks)";
  const size_t levels = size_t{1} << c.bits, key_levels = prod ? levels / 2 : levels;
  const bool hadamard = (c.head_dim & (c.head_dim - 1)) == 0;
  const size_t signs = hadamard ? c.head_dim : 0, matrix = hadamard ? 0 : c.head_dim * c.head_dim;
  if (t->key_signs.size() != signs || t->value_signs.size() != signs || t->key_rotation.size() != matrix ||
      t->value_rotation.size() != matrix)
    return "turboquant rotations: " + n(t->key_signs.size()) + " and " + n(t->value_signs.size()) +
           " signs, " + n(t->key_rotation.size()) + " and " + n(t->value_rotation.size()) +
           " matrix values; expected " +
           (hadamard ? "head_dim signs each (a Hadamard rotation)"
                     : std::string("a head_dim x head_dim matrix each (head_dim not a power of two)"));
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
