// TurboQuant on the GPU (turboquant_mse, turboquant_prod, turboquant_rvq): the tables its CPU form derives
// (codecs/turboquant/turboquant_cuda.cpp) and what the kernels run; turboquant_format.cu refuses
// the rest. Plain C++.
#pragma once

#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// The family's methods on the GPU. turboquant_rvq stores turboquant_mse's records, its codes
// indexing a joint table of the two stages' levels, so only its append differs.
enum class TurboQuantKind { Mse, Prod, Rvq };

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
  // turboquant_rvq (one pair of stages for keys and values: their bits are equal): stage 1's
  // Gaussian levels and boundaries and stage 2's Laplacian boundaries, over u = stage_scale * y.
  // The centroids above are then the joint table (2^bits entries, bits = 2 x bits per stage) and
  // the boundaries above are empty.
  std::vector<float> stage1_levels, stage1_boundaries, stage2_boundaries;
  float stage_scale = 0;  // sqrt(head_dim) as the CPU codec rounds it
};

// The bit widths the kernels run: 2, 3 or 4 (prod keys: one of them is the residual's sign).
inline bool turboquant_bits_supported(unsigned bits) { return bits >= 2 && bits <= 4; }

// Bytes of a key record (prod: two norms, bits - 1 code bits and a sign per channel; else a norm
// and the codes) and of a value record.
inline size_t turboquant_key_record(size_t head_dim, unsigned bits, bool prod) {
  return prod ? 8 + head_dim * (bits - 1) / 8 + head_dim / 8 : 4 + head_dim * bits / 8;
}
inline size_t turboquant_value_record(size_t head_dim, unsigned bits) { return 4 + head_dim * bits / 8; }

// What the kernels need of the shape alone (before any table is derived). c.bits: the code bits
// (turboquant_rvq: twice its bits per stage).
inline std::string turboquant_shape_problem(const CacheConfig& c, TurboQuantKind kind) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (kind == TurboQuantKind::Rvq && (c.bits % 2 != 0 || !turboquant_bits_supported(c.bits)))
    return "turboquant_rvq bits " + n(c.bits / 2) + " per stage; expected 1 or 2 (codes of 2 or 4 bits)";
  if (!turboquant_bits_supported(c.bits)) return "turboquant bits " + n(c.bits) + "; expected 2, 3 or 4";
  return {};
}

inline std::string turboquant_problem(const CacheConfig& c, TurboQuantKind kind) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (std::string p = turboquant_shape_problem(c, kind); !p.empty()) return p;
  const bool prod = kind == TurboQuantKind::Prod, rvq = kind == TurboQuantKind::Rvq;
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
  const size_t key_bounds = rvq ? 0 : key_levels - 1, value_bounds = rvq ? 0 : levels - 1;
  if (t->key_centroids.size() != key_levels || t->value_centroids.size() != levels ||
      t->key_boundaries.size() != key_bounds || t->value_boundaries.size() != value_bounds)
    return "turboquant codebooks: " + n(t->key_centroids.size()) + " key and " +
           n(t->value_centroids.size()) + " value levels, " + n(t->key_boundaries.size()) + " and " +
           n(t->value_boundaries.size()) + " boundaries; expected " + n(key_levels) + " and " + n(levels) +
           (rvq ? std::string(" (the joint table) and none") : ", with one boundary fewer each");
  const size_t stage_levels = rvq ? size_t{1} << (c.bits / 2) : 0;
  if (t->stage1_levels.size() != stage_levels ||
      t->stage1_boundaries.size() != (rvq ? stage_levels - 1 : 0) ||
      t->stage2_boundaries.size() != (rvq ? stage_levels - 1 : 0) || (rvq && !(t->stage_scale > 0)))
    return "turboquant stages: " + n(t->stage1_levels.size()) + " levels, " + n(t->stage1_boundaries.size()) +
           " and " + n(t->stage2_boundaries.size()) + " boundaries; expected " +
           (rvq ? n(stage_levels) + " and one boundary fewer each, with a positive scale"
                : std::string("none outside turboquant_rvq"));
  if (t->key_sketch.size() != (prod ? c.head_dim * c.head_dim : 0))
    return "turboquant key sketch of " + n(t->key_sketch.size()) + " values; expected " +
           (prod ? "head_dim x head_dim" : std::string("none outside turboquant_prod"));
  return {};
}

}  // namespace veloxquant::cuda
