// Cross-layer storage: how two adjacent layers of a model (a pair: the leader, layer l, and the
// follower, layer l + 1) store the aged-out blocks of one KV head together. Each layer keeps its
// own stream; what the two layers share is stored once, in the leader's stream, so that each
// layer's bytes() counts exactly what it holds and a model's total counts every byte once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant {

class PairCodec {
 public:
  virtual ~PairCodec() = default;

  virtual size_t dim() const = 0;
  // Tokens encoded together; every call takes a multiple of this many.
  virtual size_t block_tokens() const = 0;
  // Exact bytes each layer stores for n tokens. Additive, as Codec::code_bytes.
  virtual size_t leader_bytes(size_t n) const = 0;
  virtual size_t follower_bytes(size_t n) const = 0;

  // Encodes the same n tokens of both layers (leader, follower: [n, dim], finite, |x| <= 65504).
  virtual void encode(const float* leader, const float* follower, size_t n, uint8_t* leader_codes,
                      uint8_t* follower_codes) const = 0;

  // Attention and decoding read a layer's encoded tokens through a view: codes in the layout of
  // view_codec(), built from the pair's streams. Returns where the view is: `leader_codes` itself
  // when the leader's own codes are already in that layout, else `scratch`, resized and filled.
  // The leader's view reads only the leader's codes (follower_codes may be null then).
  virtual const Codec& view_codec() const = 0;
  virtual const uint8_t* view(bool follower, const uint8_t* leader_codes,
                              const uint8_t* follower_codes, size_t n,
                              std::vector<uint8_t>& scratch) const = 0;

  // Codes from a session file may be corrupt. Throws Error naming the first field of one layer's
  // codes (the leader's or the follower's, each checkable alone) that encode() cannot have written.
  virtual void check_codes(bool follower, const uint8_t* codes, size_t n) const = 0;
};

// The codecs a pair stores its keys and its values with.
struct PairCodecs {
  std::unique_ptr<PairCodec> key;
  std::unique_ptr<PairCodec> value;
};

// The reconstruction of one layer of a pair, [n, dim] f32: its view, decoded. For tests and tools.
std::vector<float> decode_pair_layer(const PairCodec& codec, bool follower,
                                     const uint8_t* leader_codes, const uint8_t* follower_codes,
                                     size_t n);

}  // namespace veloxquant
