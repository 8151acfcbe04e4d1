// CacheGen (Liu et al., SIGCOMM 2024): group quantization, token-wise delta of the integer codes
// and a real entropy coder (rans.h) whose output is what a block stores.
//
// A block is `block` tokens of one stream (the keys or the values of one KV head):
//  - keys are quantized per channel over the block's tokens, values per token over groups of
//    `group` channels (the last group may be shorter), each on an asymmetric min/max grid of
//    2^bits levels with fp16 step and minimum (kivi/affine_grid.h, the same grid as KIVI);
//  - the codes of the block's first token (the anchor) are stored bit-packed; every later token
//    stores d = (code_t - code_{t-1}) mod 2^bits per channel, a lossless delta;
//  - the deltas are coded with rANS under a static frequency table fitted to the block.
//
// Byte counting. Codec::code_bytes(n) must be exact and additive, a function of n only; an
// entropy-coded block has a data-dependent size. So each block is one fixed slot sized for the
// worst case (the bit-packed codes), holding a length header and the coded payload, the rest
// zero:
//
//   [fp16 step[P]][fp16 min[P]]  P = dim (keys) or block * groups (values)
//   [u8 mode][u8 0][u16 0][u32 payload length]
//   [payload: mode 0 (raw): all block * dim codes bit-packed, exactly the slot's capacity;
//             mode 1 (rans): anchor codes bit-packed, the frequency table, the rANS stream]
//   [zeros up to the slot's end]
//
// mode 1 is used whenever it is strictly shorter than the raw codes, so the slot always fits.
// code_bytes() (what the cache allocates and reports) is the slot; coded_bytes() reads the
// length headers and returns what the entropy coder actually produced: the bytes a compacted
// stream (a session file, a network transfer) needs. Reporting those from the cache needs an
// interface change (docs/methods/cachegen.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::cachegen {

enum class Stream { Keys, Values };

// One block's quantization: the codes ([block][dim], token-major) and the fp16 grids.
struct QuantizedBlock {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> step, min;  // P entries each
};

class CachegenCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): 2 <= bits <= 8, block >= 2, dim >= 1, group >= 1.
  CachegenCodec(Stream stream, size_t dim, unsigned bits, size_t block, size_t group);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return block_; }
  size_t code_bytes(size_t n) const override { return n / block_ * slot_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a block encode() cannot have written: a non-finite or negative step, a non-finite
  // minimum, a mode other than 0 or 1, non-zero header or padding bytes, a payload length that
  // does not fit the slot (or, raw, is not the slot's capacity), a corrupt frequency table or
  // rANS stream (decoded in full). Throws Error naming the stream, block and field.
  void check_codes(const uint8_t* codes, size_t n) const override;

  // The bytes the entropy coder produced for n tokens: per block the grids, the 8-byte header
  // and the payload, without the slot's padding. <= code_bytes(n).
  size_t coded_bytes(const uint8_t* codes, size_t n) const;
  // Blocks of n tokens stored rANS-coded (mode 1) rather than raw.
  size_t rans_blocks(const uint8_t* codes, size_t n) const;

  // The plain group quantizer (no delta, no entropy coding) for one block of `block` tokens, and
  // its reconstruction: decode(encode(x)) equals dequantize(quantize(x)) bit for bit.
  QuantizedBlock quantize(const float* x) const;
  void dequantize(const QuantizedBlock& q, float* x) const;

  size_t slot_bytes() const { return slot_bytes_; }
  size_t param_count() const { return params_; }
  static constexpr size_t kHeaderBytes = 8;

 private:
  void encode_block(const float* x, uint8_t* slot) const;
  // Reads one slot back into codes and grids; throws Error naming block `index` and the field.
  QuantizedBlock read_block(const uint8_t* slot, size_t index, bool check) const;
  const char* name() const { return stream_ == Stream::Keys ? "key" : "value"; }

  Stream stream_;
  size_t dim_, block_, group_, groups_, params_, capacity_, anchor_bytes_, slot_bytes_;
  unsigned bits_;
};

}  // namespace veloxquant::cachegen
