// What the CUDA kernels run, as one check of a CacheConfig: DeviceCache's constructor refuses a
// configuration by it, and cuda::supports() (cache/device_config.cpp, in the CPU library) answers
// from it, so the rules exist once. Plain C++: both libraries include it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "veloxquant/cuda.h"

namespace veloxquant::cuda {

// The sizes the QJL kernels are built for (qjl_layout.cuh's kProj and kOutlierProj).
inline constexpr size_t kQjlProj = 256, kQjlOutlierProj = 128;

// Empty when the kernels run c; otherwise the setting that they do not, and what they expect.
inline std::string config_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (c.head_dim != 64 && c.head_dim != 128) return "head_dim " + n(c.head_dim) + "; expected 64 or 128";
  if (c.batch < 1 || c.kv_heads < 1 || c.batch * c.kv_heads > 65535)
    return "batch " + n(c.batch) + " x kv_heads " + n(c.kv_heads) + "; expected 1..65535 streams";
  if (c.capacity < 1) return "capacity 0; expected at least 1 token";
  if (c.rope.dims % 2 != 0 || c.rope.dims > c.head_dim)
    return "rope dims " + n(c.rope.dims) + "; expected an even number <= head_dim";
  if (c.rope.dims != 0 && c.rope.layout != RopeLayout::Interleaved)
    return "rope layout Neox; expected Interleaved (the adjacent-pair llama layout)";
  if (c.rope.dims != 0 && c.rope.magnitude != 1.0f)
    return "RoPE magnitude " + std::to_string(c.rope.magnitude) +
           " (YaRN's attention factor); expected 1, the only one the kernels rotate with";
  const bool windowed = c.format == CacheFormat::Kivi || c.format == CacheFormat::Qjl;
  if (windowed && (c.bits != 2 && c.bits != 4))
    return std::string(c.format == CacheFormat::Kivi ? "kivi bits " : "qjl vbits ") + n(c.bits) + "; expected 2 or 4";
  if (windowed && (c.group < 32 || c.group % 32 != 0 || c.group > 128))
    return std::string(c.format == CacheFormat::Kivi ? "kivi" : "qjl") + " group " + n(c.group) +
           "; expected 32, 64, 96 or 128 (whole 32-token tiles)";
  if (!windowed && c.residual != 0) return "residual " + n(c.residual) + "; only kivi and qjl keep a residual window";
  if (c.format == CacheFormat::Kivi && c.head_dim % std::min(c.group, c.head_dim) != 0)
    return "kivi group " + n(c.group) + " does not divide head_dim " + n(c.head_dim) +
           " into value groups; expected a divisor or >= head_dim";
  if (c.format == CacheFormat::Qjl) {
    const QjlTables& q = c.qjl;
    if (q.proj != kQjlProj || q.outlier_proj != kQjlOutlierProj)
      return "qjl proj " + n(q.proj) + ", outlier_proj " + n(q.outlier_proj) +
             "; expected 256 and 128 (the defaults, the sizes the kernels are built for)";
    if (q.outliers != 4 && q.outliers != 8)
      return "qjl outliers " + n(q.outliers) + "; expected 4 or 8 (the defaults at head_dim 64 and 128)";
    if (q.sketch.size() != q.proj * c.head_dim)
      return "qjl sketch of " + n(q.sketch.size()) + " values; expected proj x head_dim";
    if ((q.value_group != 32 && q.value_group != 64 && q.value_group != 128) || c.head_dim % q.value_group != 0)
      return "qjl value group " + n(q.value_group) + "; expected 32, 64 or 128 channels dividing head_dim " +
             n(c.head_dim);
  }
  if (c.format == CacheFormat::TurboQuantMse || c.format == CacheFormat::TurboQuantProd) {
    const bool prod = c.format == CacheFormat::TurboQuantProd;
    if (c.bits < 2 || c.bits > 4) return "turboquant bits " + n(c.bits) + "; expected 2, 3 or 4";
    const TurboQuantTables& t = c.turboquant;
    const size_t levels = size_t{1} << c.bits, key_levels = prod ? levels / 2 : levels;
    if (t.key_signs.size() != c.head_dim || t.value_signs.size() != c.head_dim)
      return "turboquant signs: " + n(t.key_signs.size()) + " and " + n(t.value_signs.size()) +
             "; expected head_dim each";
    if (t.key_centroids.size() != key_levels || t.value_centroids.size() != levels ||
        t.key_boundaries.size() != key_levels - 1 || t.value_boundaries.size() != levels - 1)
      return "turboquant codebooks: " + n(t.key_centroids.size()) + " key and " + n(t.value_centroids.size()) +
             " value levels; expected " + n(key_levels) + " and " + n(levels) + ", with one boundary fewer each";
    if (t.key_sketch.size() != (prod ? c.head_dim * c.head_dim : 0))
      return "turboquant key sketch of " + n(t.key_sketch.size()) + " values; expected " +
             (prod ? "head_dim x head_dim" : std::string("none for turboquant_mse"));
  }
  return {};
}

}  // namespace veloxquant::cuda
