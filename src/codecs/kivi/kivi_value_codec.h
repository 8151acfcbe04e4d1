// KIVI values (Liu et al., ICML 2024): quantized per token, each token's channels split into
// groups sharing one asymmetric min/max grid, because value errors should stay local to a token.
// Block of 4 tokens: the 4 x dim codes, then fp16 scale[groups][4], fp16 min[groups][4]. The codes
// are one value quad (lane_tiles.h) where head_dim is a multiple of 128 / bits and the value group
// a multiple of 16 dividing it, else one dense bit stream (dense_codes.h); both take
// 4 dim bits / 8 bytes.
#pragma once

#include <memory>
#include <string>

#include "codecs/common/grid_codec.h"

namespace veloxquant::kivi {

class KiviValueCodec final : public GridCodec {
 public:
  // REQUIRES (checked by create()): bits in {2, 4, 8}, group >= 1, dim >= 1. The value group is
  // min(group, dim): a group larger than dim means one group per token. When it does not divide
  // dim the last group of each token is shorter (dim % group channels).
  KiviValueCodec(size_t dim, unsigned bits, size_t group);
  // Checks those requirements for a method's parameters and throws SpecError naming the method,
  // the parameter and the rule it breaks. Shared by every method that stores KIVI values.
  static std::unique_ptr<KiviValueCodec> create(const std::string& method, size_t dim, long bits,
                                                const char* bits_name, long group,
                                                const char* group_name);
  size_t dim() const override { return dim_; }
  // True where the codes are in lane quads (the integer VNNI kernels), false for the dense layout.
  bool lane_tiles() const { return tiled_; }
  size_t block_tokens() const override { return 4; }
  size_t code_bytes(size_t n) const override { return n / 4 * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses stored grids encode() cannot write: a NaN, infinite or negative step, a non-finite
  // minimum (affine_grid.h).
  void check_codes(const uint8_t* codes, size_t n) const override;
  // The grids: one per channel group and token, after the codes.
  unsigned bits() const override { return bits_; }
  size_t block_bytes() const override { return block_bytes_; }
  size_t grids() const override { return 4 * groups_; }
  size_t grids_at() const override { return quad_bytes_; }
  size_t grid_of(size_t t, size_t c) const override { return c / group_ * 4 + t; }
  void unpack_codes(const uint8_t* block, uint8_t* codes) const override;
  bool fused_accumulate() const override { return true; }
  // Weighted sums from codes: attention weights times per-token scales. Lane quads: split into two
  // int8 terms (15-bit precision, one scale per query, channel group and span of 64 tokens), then
  // summed by u8 x s8 dot products. Dense layout: f32 multiply-adds of the codes.
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;

 private:
  size_t dim_, group_, groups_, quad_bytes_, block_bytes_;
  unsigned bits_;
  bool tiled_;
};

}  // namespace veloxquant::kivi
