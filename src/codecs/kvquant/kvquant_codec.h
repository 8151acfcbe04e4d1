// KVQuant (Hooper et al., NeurIPS 2024, arXiv 2401.18079): per-channel key and per-token value
// quantization to non-uniform levels fitted offline (nuq_levels.h), dense-and-sparse: each
// vector's largest deviations kept exactly in a sparse list, and the stream's first token (the
// attention sink) kept exactly.
//
// One token of d elements, b bits, k sparse slots (s = max(k, 1) when the sink is kept, else k):
//   fp16 lo, fp16 hi          values only: the token's range without its outliers
//   codes                     d codes of b bits (core/bitpack.h): the nearest level of
//                             u = (x - mid) / half, clamped to [-1, 1]; mid, half from lo, hi
//                             (keys: the channel's calibrated range, values: the token's)
//   s x (u16 index, fp16 x)   the k elements with the largest |u| (keys) or |x| (values), in
//                             ascending index order, stored as fp16: as exact as an fp16 cache.
//                             Index 0xFFFF in the first slot: the token is the stream's first
//                             token, read from the stream state; 0xFFFE: an unused slot (k = 0)
// Per stream (Codec::fit_streams): the first token's fp16 row, when the sink is kept. Shared per
// layer (state_bytes): every KV head's levels and, for keys, per-channel lo / hi, as f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::kvquant {

enum class Axis { PerChannel, PerToken };  // keys, values

inline constexpr uint16_t kSinkSlot = 0xFFFF, kEmptySlot = 0xFFFE;

// One KV head's calibrated tables for one stream.
struct HeadTables {
  std::vector<float> levels;  // 2^bits ascending, in [-1, 1]
  std::vector<float> lo, hi;  // keys: per channel, lo < hi; values: empty
};

struct KvquantConfig {
  unsigned bits = 3;
  size_t outliers = 1;  // sparse entries per vector
  bool sink = true;
};

class KvquantCodec final : public Codec {
 public:
  // The prototype a layer's make() returns: every KV head's tables. REQUIRES (checked by the
  // method): 1 <= bits <= 8, outliers < dim, tables shaped as above.
  KvquantCodec(size_t dim, Axis axis, const KvquantConfig& cfg, std::vector<HeadTables> heads);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * token_bytes_; }
  size_t state_bytes() const override;
  bool fits_streams() const override { return true; }
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return cfg_.sink ? 2 * dim_ : 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses what encode() cannot write: an index out of range, repeated or out of order, a sink
  // mark where no sink is kept or outside the first slot, an unused slot while outliers are kept,
  // a non-finite fp16 value, a value range with lo > hi.
  void check_codes(const uint8_t* codes, size_t n) const override;

  // The layout, for tests and docs.
  size_t token_bytes() const { return token_bytes_; }
  size_t slots() const { return slots_; }
  size_t codes_offset() const { return axis_ == Axis::PerToken ? 4 : 0; }
  size_t slots_offset() const;

 private:
  const HeadTables& tables() const;  // this stream's; throws on the prototype
  void encode_token(const float* x, const HeadTables& t, uint8_t* out) const;

  size_t dim_;
  Axis axis_;
  KvquantConfig cfg_;
  size_t slots_, token_bytes_;
  std::shared_ptr<const std::vector<HeadTables>> heads_;
  size_t head_ = SIZE_MAX;       // the stream's KV head; SIZE_MAX on the prototype
  std::vector<uint16_t> sink_;   // the stream's first token in fp16 (empty without the sink)
};

}  // namespace veloxquant::kvquant
