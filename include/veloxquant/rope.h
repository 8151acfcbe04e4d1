// Rotary position embedding parameters, shared by the runtime (queries) and the cache (keys).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace veloxquant {

enum class RopeLayout : uint8_t {
  Interleaved,  // rotates pairs (2i, 2i+1): GGUF "llama" models (their q/k weights are permuted)
  Neox,         // rotates pairs (i, i + dims/2): qwen2, GPT-NeoX
};

struct RopeParams {
  uint32_t dims = 0;  // leading dimensions of each head that rotate; 0 disables RoPE
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling: angle = pos * freq_scale * base^(-2i/dims)
  RopeLayout layout = RopeLayout::Interleaved;
  // Per-pair divisors of the frequencies (llama 3.1+'s rope_freqs.weight, dims / 2 values);
  // null: all 1.
  std::shared_ptr<const std::vector<float>> freq_factors = nullptr;
  // YaRN (ext_factor > 0): pair i keeps its frequency below yarn_low, takes freq_scale's above
  // yarn_high and a linear mix between, as ggml's rope_yarn does; 0: plain linear scaling.
  float ext_factor = 0.0f;
  float yarn_low = 0.0f, yarn_high = 0.0f;
  // Both rotated coordinates are multiplied by this (YaRN's attention factor); 1 otherwise.
  float magnitude = 1.0f;

  bool operator==(const RopeParams&) const = default;
};

// The angle pair i < dims / 2 turns by per position, in double:
// base^(-2i / dims) / factor_i * (freq_scale * (1 - r_i) + r_i), r_i the YaRN ramp (0 without
// YaRN). Host code of every backend computes its frequencies here.
inline double rope_inverse_frequency(const RopeParams& rope, size_t i) {
  double f = std::pow(static_cast<double>(rope.freq_base), -2.0 * static_cast<double>(i) / rope.dims);
  if (rope.freq_factors) f /= static_cast<double>((*rope.freq_factors)[i]);
  double mix = 0.0;
  if (rope.ext_factor != 0.0f) {
    const float y = (static_cast<float>(i) - rope.yarn_low) / std::max(0.001f, rope.yarn_high - rope.yarn_low);
    mix = static_cast<double>((1.0f - std::min(1.0f, std::max(0.0f, y))) * rope.ext_factor);
  }
  return f * (rope.freq_scale * (1.0 - mix) + mix);
}

// Rotates `heads` vectors of `head_dim` floats (contiguous) in place for position `pos`.
// REQUIRES: rope.dims is even and <= head_dim.
void apply_rope(const RopeParams& rope, float* x, size_t heads, size_t head_dim, int64_t pos);

}  // namespace veloxquant
