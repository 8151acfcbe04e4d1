// CacheGen (Liu et al., SIGCOMM 2024): group quantization, token-wise delta of the integer codes
// and a real entropy coder (rans.h) whose output is what a block stores.
//
// A block is `block` tokens of one stream (the keys or the values of one KV head):
//  - keys are quantized per channel over the block's tokens, values per token over groups of
//    `group` channels (the last group may be shorter), each on an asymmetric min/max grid of
//    2^bits levels with fp16 step and minimum (common/affine_grid.h, the same grid as KIVI);
//  - the codes of the block's first token (the anchor) are stored bit-packed; every later token
//    stores d = (code_t - code_{t-1}) mod 2^bits per channel, a lossless delta;
//  - the deltas are coded with rANS under a static frequency table fitted to the block.
//
// Storage. Each block is stored in the bytes it codes to, blocks back to back (a variable-length
// codec, Codec::variable_length): what the cache holds and bytes() reports is what the coder
// produced. A block:
//
//   [fp16 step[P]][fp16 min[P]]  P = dim (keys) or block * groups (values)
//   [u8 mode][u8 0][u16 0][u32 payload length L]
//   [payload, L bytes: mode 0 (raw): all block * dim codes bit-packed, L = capacity;
//                      mode 1 (rans): anchor codes bit-packed, the frequency table, the rANS
//                      stream, L < capacity]
//
// capacity = the bit-packed codes' bytes. mode 1 is used whenever it is strictly shorter, so no
// block exceeds its worst case, code_bytes(block) (the bound the cache sizes its encode buffer
// by); the header's length is how the cache finds where the next block starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
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
  // An upper bound (Codec::variable_length): every block at its worst case, raw codes.
  size_t code_bytes(size_t n) const override { return n / block_ * max_block_bytes_; }
  size_t state_bytes() const override { return 0; }
  bool variable_length() const override { return true; }
  // Reads the block's header: throws Error naming the field when the mode or the payload length
  // is not one encode() writes, or the block runs past `available`.
  size_t encoded_block_bytes(const uint8_t* block, size_t available) const override;
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a block encode() cannot have written: a non-finite or negative step, a non-finite
  // minimum, a bad header (encoded_block_bytes), a corrupt frequency table or rANS stream
  // (decoded in full). Throws Error naming the stream, block and field.
  void check_codes(const uint8_t* codes, size_t n) const override;

  // Blocks of n tokens stored rANS-coded (mode 1) rather than raw.
  size_t rans_blocks(const uint8_t* codes, size_t n) const;

  // The plain group quantizer (no delta, no entropy coding) for one block of `block` tokens, and
  // its reconstruction: decode(encode(x)) equals dequantize(quantize(x)) bit for bit.
  QuantizedBlock quantize(const float* x) const;
  void dequantize(const QuantizedBlock& q, float* x) const;

  size_t param_count() const { return params_; }
  static constexpr size_t kHeaderBytes = 8;

 private:
  struct BlockHeader {
    uint8_t mode;
    uint32_t length;  // of the payload
    size_t bytes;     // of the whole block
  };
  // Writes one block at `out`; returns its bytes.
  size_t encode_block(const float* x, uint8_t* out) const;
  // The header of the block at `block`, of which `available` bytes may be read; throws Error
  // starting "field " and naming it.
  BlockHeader read_header(const uint8_t* block, size_t available) const;
  // Reads the block at p back into codes and grids and moves p past it; throws Error naming
  // block `index` and the field. REQUIRES: the block lies in the buffer (encoded_bytes()).
  QuantizedBlock read_block(const uint8_t*& p, size_t index, bool check) const;
  std::string corrupt_prefix() const;
  const char* name() const { return stream_ == Stream::Keys ? "key" : "value"; }

  Stream stream_;
  size_t dim_, block_, group_, groups_, params_, capacity_, anchor_bytes_, max_block_bytes_;
  unsigned bits_;
};

}  // namespace veloxquant::cachegen
