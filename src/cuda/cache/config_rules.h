// What every device format needs of a CacheConfig, as one check: DeviceCache's constructor refuses
// a configuration by it, and cuda::supports() (cache/device_config.cpp, in the CPU library) answers
// from it; each family's own rules sit beside its kernels (src/cuda/<family>/*_rules.h). Plain
// C++: both libraries include it.
#pragma once

#include <cmath>
#include <string>

#include "veloxquant/cuda.h"

namespace veloxquant::cuda {

// The most dynamic shared memory a block of the H100 and H200 may take (227 KiB): the formats
// whose attention blocks hold tables or decoded tiles check their sizes against it.
inline constexpr size_t kMaxSharedMemoryPerBlock = 232448;

// An evicting cache's settings (budget > 0). The budget leaves room for the fp16 residual rows
// and one whole block beside the sinks, so the tokens that leave are always whole blocks of
// codes: the kept tokens' blocks then start where the CPU cache's do (the CPU takes smaller
// budgets, cutting into the residual rows).
inline std::string eviction_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (c.sinks > 64) return "sinks " + n(c.sinks) + "; expected at most 64";
  if (c.budget < c.sinks + c.residual + c.block)
    return "budget " + n(c.budget) + "; expected at least sinks + residual + block = " + n(c.sinks) + " + " +
           n(c.residual) + " + " + n(c.block) + " = " + n(c.sinks + c.residual + c.block) +
           " on the GPU, which evicts whole blocks of codes only";
  if (c.window > 0) return "an evicting cache on a sliding-window layer; expected a full-attention layer";
  if (c.keys_before_rope)
    return "an evicting cache of keys stored before RoPE; expected a method that stores them rotated";
  return {};
}

// Empty when the kernels run c's shape; otherwise the setting that they do not, and what they expect.
inline std::string config_problem(const CacheConfig& c) {
  auto n = [](size_t v) { return std::to_string(v); };
  if (c.head_dim != 64 && c.head_dim != 80 && c.head_dim != 96 && c.head_dim != 128 && c.head_dim != 256)
    return "head_dim " + n(c.head_dim) + "; expected 64, 80, 96, 128 or 256";
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
  if (!(c.softcap >= 0.0f) || !std::isfinite(c.softcap))
    return "softcap " + std::to_string(c.softcap) + "; expected a finite number >= 0 (0: none)";
  if (c.window > size_t{1} << 30) return "window " + n(c.window) + "; expected at most 2^30 tokens (0: none)";
  if (c.block < 1 || c.block > 4096) return "block " + n(c.block) + "; expected 1..4096 tokens";
  if (c.budget == 0 && c.sinks > 0) return "sinks " + n(c.sinks) + " without a budget; expected sinks 0";
  if (c.budget > 0) return eviction_problem(c);
  return {};
}

// The residual-window formats (KIVI, QJL): 2- or 4-bit codes (`bits_name` says which, e.g.
// "qjl vbits"), key blocks of whole 32-token tiles.
inline std::string windowed_problem(const std::string& name, const std::string& bits_name, const CacheConfig& c) {
  if (c.bits != 2 && c.bits != 4) return bits_name + " " + std::to_string(c.bits) + "; expected 2 or 4";
  if (c.group < 32 || c.group % 32 != 0 || c.group > 128)
    return name + " group " + std::to_string(c.group) + "; expected 32, 64, 96 or 128 (whole 32-token tiles)";
  return {};
}

// The format's tables as its own type T, or null when c holds none or another family's.
template <class T>
const T* tables_of(const CacheConfig& c) {
  return dynamic_cast<const T*>(c.tables.get());
}

}  // namespace veloxquant::cuda
