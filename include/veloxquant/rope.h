// Rotary position embedding parameters, shared by the runtime (queries) and the cache (keys).
#pragma once

#include <cstddef>
#include <cstdint>

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
};

// Rotates `heads` vectors of `head_dim` floats (contiguous) in place for position `pos`.
// REQUIRES: rope.dims is even and <= head_dim.
void apply_rope(const RopeParams& rope, float* x, size_t heads, size_t head_dim, int64_t pos);

}  // namespace veloxquant
