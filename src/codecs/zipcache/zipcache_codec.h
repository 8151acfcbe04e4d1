// ZipCache (He et al., NeurIPS 2024, arXiv 2405.14256): per-token mixed precision. In every block
// of G tokens the k tokens with the highest saliency (the normalized attention the cache measured
// from the real queries, Codec::encode_salient) are quantized at h bits, the other G - k at l bits.
// Each token has its own asymmetric min/max grid (common/affine_grid.h) over its channels. Keys are
// first divided channel by channel by c = sqrt(max |x|) over the block (the paper's
// channel-separable tokenwise quantization), so that outlier channels do not stretch every
// token's grid; values are quantized per token as they are.
//
// Block of G tokens, head_dim d, k salient tokens:
//   bitmap[ceil(G / 8)]           bit t (byte t / 8, bit t % 8) set when token t is salient;
//                                 exactly k bits set, padding bits zero
//   fp16 channel_scale[d]         keys only: c rounded up to fp16 (0 for an all-zero channel)
//   fp16 step[G], fp16 min[G]     one grid per token over its (normalized) channels, at h bits
//                                 for a salient token, l bits otherwise
//   high codes                    k x d codes of h bits: the salient tokens in ascending
//                                 position, channels ascending, one little-endian bit stream
//                                 (core/bitpack.h)
//   low codes                     (G - k) x d codes of l bits, the other tokens, likewise
// decode: x = c * (min_t + step_t * q) for keys, min_t + step_t * q for values.
// Nothing is shared between blocks: state_bytes() is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::zipcache {

// What ranks a block's tokens. Attention: the cache's normalized attention, falling back to the
// token's own L2 norm when no query has attended; Norm: always the norm (the `saliency=key_norm`
// ablation, which shows what the real attention is worth). The cache holds the tokens for the
// step's attention in both modes (wants_attention), so that the two are measured under the same
// protocol: a held token is attended in fp16 by the queries of its own step.
enum class Saliency { Attention, Norm };

// Salient tokens per block: round(fraction * block).
size_t salient_tokens(double fraction, size_t block);

class ZipCacheCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): 2 <= low_bits < high_bits <= 8, salient <= block,
  // block >= 1, dim >= 1. channel_scales: true for keys.
  ZipCacheCodec(size_t dim, size_t block, size_t salient, unsigned high_bits, unsigned low_bits,
                bool channel_scales, Saliency saliency);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return block_; }
  size_t code_bytes(size_t n) const override { return n / block_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  bool wants_attention() const override { return true; }
  void encode(const float* x, size_t n, uint8_t* codes) const override {
    encode_salient(x, n, nullptr, codes);
  }
  // attention: n finite scores (higher: more salient) or nullptr. Ties go to the lower position.
  void encode_salient(const float* x, size_t n, const float* attention,
                      uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses what encode() cannot write: a bitmap without exactly salient_count() bits set or
  // with a padding bit set, a non-finite or negative channel scale or token step, a non-finite
  // token minimum.
  void check_codes(const uint8_t* codes, size_t n) const override;
  // Attention on the codes, per block, each code stream unpacked to floats once per call:
  //   keys:   q . k_t = step_t (q o c) . code_t + min_t sum(q o c), with c the channel scales;
  //   values: sum_t w_t v_t = sum_t (w_t step_t) code_t + sum_t w_t min_t in every channel
  //           (keys are never summed by attention: their accumulate() decodes).
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return !channel_scales_; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const override;

  // The layout, for tests and docs.
  size_t salient_count() const { return k_; }
  size_t block_bytes() const { return block_bytes_; }
  size_t bitmap_bytes() const { return (block_ + 7) / 8; }
  size_t channel_scales_offset() const { return bitmap_bytes(); }
  size_t grids_offset() const { return channel_scales_offset() + (channel_scales_ ? 2 * dim_ : 0); }
  size_t high_offset() const { return grids_offset() + 4 * block_; }
  size_t low_offset() const { return high_offset() + high_bytes_; }

 private:
  // Block b's codes as floats, [block_tokens(), dim()] in stored order (salient tokens first),
  // and order[t]: where token t's row is.
  void block_rows(const uint8_t* block, float* rows, std::vector<size_t>& order) const;

  size_t dim_, block_, k_, high_bytes_, low_bytes_, block_bytes_;
  unsigned high_bits_, low_bits_;
  bool channel_scales_;
  Saliency saliency_;
};

}  // namespace veloxquant::zipcache
