#include "codecs/kivi/kivi_value_codec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "codecs/kivi/lane_tiles.h"
#include "core/bitpack.h"
#include "veloxquant/error.h"

namespace veloxquant::kivi {
KiviValueCodec::KiviValueCodec(size_t dim, unsigned bits, size_t group)
    : dim_(dim), group_(std::min(group, dim)), groups_((dim + group_ - 1) / group_),
      quad_bytes_(4 * dim * bits / 8), block_bytes_(quad_bytes_ + 4 * groups_ * 4), bits_(bits),
      tiled_(dim % value_row_channels(bits) == 0 && group_ % 16 == 0 && dim % group_ == 0) {}

std::unique_ptr<KiviValueCodec> KiviValueCodec::create(const std::string& method, size_t dim,
                                                       long bits, const char* bits_name, long group,
                                                       const char* group_name) {
  const std::string at = method + ": ";
  if (bits != 2 && bits != 4 && bits != 8) {
    throw SpecError(at + bits_name + "=" + std::to_string(bits) +
                    " is not supported; expected 2, 4 or 8 (codes are packed whole per byte)");
  }
  if (group < 16 || group % 16 != 0) {
    throw SpecError(at + group_name + "=" + std::to_string(group) + " is not a positive multiple of 16");
  }
  if (dim == 0) throw SpecError(at + "head_dim 0; expected at least 1");
  return std::make_unique<KiviValueCodec>(dim, static_cast<unsigned>(bits), static_cast<size_t>(group));
}

void KiviValueCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = dim_;
  std::vector<uint8_t> q(4 * d);
  for (size_t b = 0; b < n / 4; ++b) {
    uint8_t* out = codes + b * block_bytes_;
    auto* scale = reinterpret_cast<uint16_t*>(out + quad_bytes_);
    auto* mins = scale + 4 * groups_;
    for (size_t i = 0; i < 4; ++i) {
      const float* xt = x + (b * 4 + i) * d;
      for (size_t g = 0; g < groups_; ++g) {
        const float* xg = xt + g * group_;
        const size_t width = std::min(group_, d - g * group_);
        const auto [lo, hi] = std::minmax_element(xg, xg + width);
        const AffineGrid grid = AffineGrid::fit(*lo, *hi, bits_);
        scale[g * 4 + i] = grid.scale_f16;
        mins[g * 4 + i] = grid.min_f16;
        for (size_t c = 0; c < width; ++c) q[i * d + g * group_ + c] = grid.quantize(xg[c]);
      }
    }
    if (tiled_) pack_value_quad(q.data(), d, bits_, out);
    else pack_bits(q.data(), 4 * d, bits_, out);
  }
}

void KiviValueCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t b = 0; b < n / 4; ++b) {
    const auto* scale = reinterpret_cast<const uint16_t*>(codes + b * block_bytes_ + quad_bytes_);
    check_stored_grids(scale, scale + 4 * groups_, 4 * groups_, "value", b);
  }
}

void KiviValueCodec::unpack_codes(const uint8_t* block, uint8_t* codes) const {
  if (tiled_) unpack_value_quad(block, dim_, bits_, codes);
  else unpack_bits(block, 4 * dim_, bits_, codes);
}

void KiviValueCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = dim_;
  std::vector<uint8_t> q(4 * d);
  for (size_t b = 0; b < n / 4; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    const auto* scale = reinterpret_cast<const uint16_t*>(in + quad_bytes_);
    const auto* mins = scale + 4 * groups_;
    unpack_codes(in, q.data());
    // Each group's grid converted once: prefill decodes every value of the cache at each chunk.
    for (size_t i = 0; i < 4; ++i)
      for (size_t g = 0; g < groups_; ++g) {
        const float lo = f16_to_f32(mins[g * 4 + i]), step = f16_to_f32(scale[g * 4 + i]);
        const size_t c0 = g * group_, c1 = std::min(d, c0 + group_);
        float* xt = x + (b * 4 + i) * d;
        const uint8_t* qt = q.data() + i * d;
        for (size_t c = c0; c < c1; ++c) xt[c] = lo + step * static_cast<float>(qt[c]);
      }
  }
}

}  // namespace veloxquant::kivi
