// A KIVI block read as its two parts: the integer codes, and the grids (an fp16 step and an fp16
// minimum each) that turn them into values, x = min + step * code. Cross-layer code sharing
// (xquant) stores the codes of a block once for two layers and the grids per layer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "veloxquant/codec.h"

namespace veloxquant {

class GridCodec : public Codec {
 public:
  virtual unsigned bits() const = 0;
  virtual size_t block_bytes() const = 0;
  // A block holds grids() fp16 steps from byte grids_at(), then grids() fp16 minimums; the rest
  // of its bytes are the codes.
  virtual size_t grids() const = 0;
  virtual size_t grids_at() const = 0;
  // The grid that element (token t, channel c) of a block is read with.
  virtual size_t grid_of(size_t t, size_t c) const = 0;
  // The codes of one block as integers, [block_tokens()][dim()].
  virtual void unpack_codes(const uint8_t* block, uint8_t* codes) const = 0;
};

}  // namespace veloxquant
