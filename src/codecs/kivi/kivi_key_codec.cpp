#include "codecs/kivi/kivi_key_codec.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "codecs/kivi/dense_codes.h"
#include "codecs/kivi/lane_tiles.h"
#include "core/bitpack.h"

namespace veloxquant::kivi {
namespace {
const uint16_t* halves(const uint8_t* p) { return reinterpret_cast<const uint16_t*>(p); }
}  // namespace

KiviKeyCodec::KiviKeyCodec(size_t dim, unsigned bits, size_t group)
    : dim_(dim), group_(group), block_bytes_(4 * dim + group * dim * bits / 8), bits_(bits),
      tiled_(dim % key_row_channels(bits) == 0) {}

void KiviKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = dim_, tile_bytes = kLanes * d * bits_ / 8;
  std::vector<uint8_t> q(group_ * d);
  std::vector<AffineGrid> grids(d);
  for (size_t b = 0; b < n / group_; ++b) {
    const float* xb = x + b * group_ * d;
    uint8_t* out = codes + b * block_bytes_;
    auto* scale = reinterpret_cast<uint16_t*>(out);
    auto* mins = scale + d;
    for (size_t c = 0; c < d; ++c) {
      float lo = xb[c], hi = xb[c];
      for (size_t t = 1; t < group_; ++t) lo = std::min(lo, xb[t * d + c]), hi = std::max(hi, xb[t * d + c]);
      grids[c] = AffineGrid::fit(lo, hi, bits_);
      scale[c] = grids[c].scale_f16;
      mins[c] = grids[c].min_f16;
    }
    for (size_t t = 0; t < group_; ++t)
      for (size_t c = 0; c < d; ++c) q[t * d + c] = grids[c].quantize(xb[t * d + c]);
    if (!tiled_) {
      pack_bits(q.data(), group_ * d, bits_, out + 4 * d);
      continue;
    }
    for (size_t tile = 0; tile < group_ / kLanes; ++tile)
      pack_key_tile(q.data() + tile * kLanes * d, d, bits_, out + 4 * d + tile * tile_bytes);
  }
}

void KiviKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t b = 0; b < n / group_; ++b) {
    const auto* halves = reinterpret_cast<const uint16_t*>(codes + b * block_bytes_);
    check_stored_grids(halves, halves + dim_, dim_, "key", b);  // a scale, then a min, per channel
  }
}

void KiviKeyCodec::unpack_codes(const uint8_t* block, uint8_t* codes) const {
  const size_t d = dim_, tile_bytes = kLanes * d * bits_ / 8;
  if (!tiled_) return unpack_bits(block + 4 * d, group_ * d, bits_, codes);
  for (size_t tile = 0; tile < group_ / kLanes; ++tile)
    unpack_key_tile(block + 4 * d + tile * tile_bytes, d, bits_, codes + tile * kLanes * d);
}

void KiviKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = dim_;
  std::vector<uint8_t> q(group_ * d);
  std::vector<float> scale(d), mins(d);
  for (size_t b = 0; b < n / group_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    for (size_t c = 0; c < d; ++c) {
      scale[c] = f16_to_f32(halves(in)[c]);
      mins[c] = f16_to_f32(halves(in)[d + c]);
    }
    unpack_codes(in, q.data());
    float* xb = x + b * group_ * d;
    for (size_t t = 0; t < group_; ++t)
      for (size_t c = 0; c < d; ++c) xb[t * d + c] = mins[c] + scale[c] * static_cast<float>(q[t * d + c]);
  }
}

}  // namespace veloxquant::kivi
