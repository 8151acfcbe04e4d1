// KITTY keys (2-bit KV with a dynamic channel-wise precision boost): KIVI's per-channel keys,
// except that in every block of G tokens the `boost` channels with the largest range over the
// block (max - min, the width the min/max grid has to cover) are quantized at `high_bits` and
// the rest at `bits`. Which channels are boosted changes from block to block and is stored.
//
// Block of G tokens, head_dim d, k boosted channels, b low bits, h high bits:
//   mask[ceil(d / 8)]          bit c (byte c / 8, bit c % 8) set when channel c is boosted;
//                              exactly k bits set, padding bits zero
//   fp16 scale[d], fp16 min[d] one grid per channel (common/affine_grid.h), at h bits for a
//                              boosted channel, b bits otherwise
//   low codes                  G x (d - k) codes of b bits, token-major, channels in ascending
//                              order, one little-endian bit stream (core/bitpack.h)
//   high codes                 G x k codes of h bits, token-major, ascending channels, one stream
// Nothing is shared between blocks: state_bytes() is 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "veloxquant/codec.h"

namespace veloxquant::kitty {

// Boosted channels per block: round(boost * dim), at most dim.
size_t boost_channels(double boost, size_t dim);

class KittyKeyCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): 1 <= bits < high_bits <= 8, boost <= dim, group >= 1,
  // dim >= 1.
  KittyKeyCodec(size_t dim, unsigned bits, unsigned high_bits, size_t boost, size_t group);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return group_; }
  size_t code_bytes(size_t n) const override { return n / group_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses what encode() cannot write: a channel mask without exactly boost_count() bits set or
  // with a padding bit set, a non-finite or negative stored step, a non-finite minimum.
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  // Scores from codes, per block: q . k_t = sum_c (q_c scale_c) code_tc + q . min. The query is
  // folded with the scales and split by the block's mask into its low and boosted channels, the
  // two code streams become floats once for every query, and each gives f32 dot products.
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;

  // The layout, for tests and docs.
  size_t boost_count() const { return k_; }
  size_t block_bytes() const { return block_bytes_; }
  size_t mask_bytes() const { return (dim_ + 7) / 8; }
  size_t grids_offset() const { return mask_bytes(); }
  size_t low_offset() const { return grids_offset() + 4 * dim_; }
  size_t high_offset() const { return low_offset() + low_bytes_; }

 private:
  size_t dim_, group_, k_, low_bytes_, high_bytes_, block_bytes_;
  unsigned bits_, high_bits_;
};

}  // namespace veloxquant::kitty
