// QJL on the GPU: the tables its CPU form derives (codecs/qjl/qjl_method.cpp) and what the kernels
// run; qjl_format.cu refuses the rest. Plain C++.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// The sizes the QJL kernels are built for (qjl_layout.cuh's kProj and kOutlierProj).
inline constexpr size_t kQjlProj = 256, kQjlOutlierProj = 128;

// What `qjl` derives from the layer's seed (codecs/qjl/qjl_key_codec.h), and the sizes its make()
// settles on for the head_dim. The GPU runs proj 256, outlier_proj 128 and 1 to 8 outlier channels
// (the defaults: head_dim / 16, at most 8), with any value group.
struct QjlTables : FormatTables {
  std::vector<float> sketch;  // S: proj x head_dim, row-major, i.i.d. N(0, 1)
  size_t proj = 256;          // sign bits of a key's inlier part
  size_t outliers = 8;        // outlier channels per key group of CacheConfig::group tokens
  size_t outlier_proj = 128;  // sign bits of the outlier part (sketched by the first rows of S)
  size_t value_group = 32;    // value channels per min/max grid: min(vgroup, head_dim)
};

inline std::string qjl_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (std::string p = windowed_problem("qjl", "qjl vbits", c); !p.empty()) return p;
  const QjlTables* q = tables_of<QjlTables>(c);
  if (q == nullptr) return "qjl without its tables; expected QjlTables (the sketch and its sizes)";
  if (q->proj != kQjlProj || q->outlier_proj != kQjlOutlierProj)
    return "qjl proj " + n(q->proj) + ", outlier_proj " + n(q->outlier_proj) +
           "; expected 256 and 128 (the defaults, the sizes the kernels are built for)";
  if (q->outliers < 1 || q->outliers > 8)
    return "qjl outliers " + n(q->outliers) + " (at head_dim " + n(c.head_dim) +
           "); expected 1 to 8 (min(8, head_dim / 16) by default)";
  if (q->sketch.size() != q->proj * c.head_dim)
    return "qjl sketch of " + n(q->sketch.size()) + " values; expected proj x head_dim";
  return {};
}

}  // namespace veloxquant::cuda
