// KIVI keys (Liu et al., ICML 2024): quantized per channel, each channel of a group of G tokens
// sharing one asymmetric min/max grid, because key outliers live in fixed channels.
// Block of G tokens: fp16 scale[dim], fp16 min[dim], then the G x dim codes: G/16 lane tiles
// (lane_tiles.h) where head_dim is a multiple of 32 / bits, else one dense bit stream
// (dense_codes.h). Both take 4 dim + G dim bits / 8 bytes.
#pragma once

#include "codecs/common/grid_codec.h"

namespace veloxquant::kivi {

class KiviKeyCodec final : public GridCodec {
 public:
  // REQUIRES (checked by the method): bits in {2, 4, 8}, group % 16 == 0, dim >= 1.
  KiviKeyCodec(size_t dim, unsigned bits, size_t group);
  // True where the codes are in lane tiles (the integer VNNI kernels), false for the dense layout.
  bool lane_tiles() const { return tiled_; }
  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return group_; }
  size_t code_bytes(size_t n) const override { return n / group_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses stored grids encode() cannot write: a NaN, infinite or negative step, a non-finite
  // minimum (affine_grid.h).
  void check_codes(const uint8_t* codes, size_t n) const override;
  // The grids: one per channel, at the start of the block.
  unsigned bits() const override { return bits_; }
  size_t block_bytes() const override { return block_bytes_; }
  size_t grids() const override { return dim_; }
  size_t grids_at() const override { return 0; }
  size_t grid_of(size_t /*t*/, size_t c) const override { return c; }
  void unpack_codes(const uint8_t* block, uint8_t* codes) const override;
  bool fused_score() const override { return true; }
  // Scores from codes: per block the query is folded with the channel scales. Lane tiles: the
  // folded query is split into two int8 terms (15-bit precision, one scale per block and query),
  // then 16 tokens at a time go through u8 x s8 dot products. Dense layout: f32 dot products with
  // the codes.
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;

 private:
  size_t dim_, group_, block_bytes_;
  unsigned bits_;
  bool tiled_;
};

}  // namespace veloxquant::kivi
