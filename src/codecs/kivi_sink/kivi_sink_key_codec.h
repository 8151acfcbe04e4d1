// KIVI keys with attention sinks kept exact (after KVSink, Su & Yuan 2025). A sink draws a large
// share of every query's attention and often has a key far larger than its neighbours'; in KIVI
// it would set its group's per-channel min/max and coarsen every other key of the group. Here the
// `sinks` tokens of each block of G that received the most attention (normalized, from the real
// queries: Codec::encode_salient) are stored in fp16 and left out of the block's grids; without
// attention (nullptr) the largest keys by L2 norm are taken instead.
//
// Block of G tokens, head_dim d, s sinks:
//   KIVI key block                  4 d + G d bits / 8 bytes (kivi_key_codec.h), the sinks' rows
//                                   replaced by a non-sink row of the block so they do not reach
//                                   the grids
//   u16 index[s]                    the sinks' token indices in the block, strictly increasing
//   fp16 row[s][d]                  their keys
// s = 0 is KIVI byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/kivi/kivi_key_codec.h"
#include "veloxquant/codec.h"

namespace veloxquant::kivi_sink {

class KiviSinkKeyCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): KIVI's rules for bits and group, sinks < group.
  // by_attention false: the sinks are the largest keys even where the cache has attention. The
  // cache holds the tokens for the step's attention either way, so that both variants are
  // measured under the same protocol (held tokens are attended in fp16 by their own step).
  KiviSinkKeyCodec(size_t dim, unsigned bits, size_t group, size_t sinks, bool by_attention = true);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return group_; }
  size_t code_bytes(size_t n) const override { return n / group_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  bool wants_attention() const override { return true; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void encode_salient(const float* x, size_t n, const float* attention, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // KIVI's checks of each block, and sink indices in range and strictly increasing with finite
  // fp16 rows.
  void check_codes(const uint8_t* codes, size_t n) const override;
  // KIVI's fused scores for each block, then the sinks' scores from their exact keys.
  bool fused_score() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;

  size_t block_bytes() const { return block_bytes_; }
  // The sinks' token indices in block b of the codes.
  const uint8_t* sink_indices(const uint8_t* codes, size_t b) const {
    return codes + b * block_bytes_ + kivi_bytes_;
  }

 private:
  size_t dim_, group_, sinks_, kivi_bytes_, block_bytes_;
  bool by_attention_;
  kivi::KiviKeyCodec kivi_;
};

}  // namespace veloxquant::kivi_sink
