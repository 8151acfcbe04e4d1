// SVDq keys (Hong et al., arXiv 2502.15304): each KV head's keys are projected on the right
// singular vectors of its prompt's keys; the latent channels, ordered by singular value, are
// quantized per channel over a block of tokens with bits by importance, and the trailing ones are
// dropped (0 bits).
//
// The schedule gives the bits of each eighth of the latent channels, leading first: part p holds
// latent channels [ceil(p d / 8), ceil((p + 1) d / 8)). Consecutive parts of equal bits form a
// tier; each tier is stored as a KIVI key block (kivi_key_codec.h) over its latent channels,
// which brings KIVI's grids, code layouts, fused scoring kernels and corrupt-code checks.
//
// Block of G tokens, latents y = k V (V^T V)^-1 / c (latent_basis.h), one KIVI key block per tier,
// leading tier first:
//   fp16 scale[m], fp16 min[m]   per latent channel of the tier, over the G tokens
//   codes                        G x m codes of the tier's bits (KIVI lane tiles or dense stream)
// The basis is per stream (fit_streams, stream_state_bytes); state_bytes() is 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/svdq/latent_basis.h"
#include "veloxquant/codec.h"

namespace veloxquant::svdq {

inline constexpr size_t kParts = 8;
using Schedule = std::array<unsigned, kParts>;  // bits per eighth of the latent channels

struct LatentTier {
  size_t first = 0, count = 0;  // latent channels [first, first + count)
  unsigned bits = 0;
  size_t offset = 0;  // byte offset of the tier's KIVI block inside an SVDq block
  std::shared_ptr<const kivi::KiviKeyCodec> codes;
};

class SvdqKeyCodec final : public Codec {
 public:
  // The prototype make() returns: sizes only; encode, decode and score throw Error until
  // with_states() builds a codec with a fitted basis. REQUIRES (checked by the method): every
  // bit count in {0, 2, 4, 8}, non-increasing, the first not 0; group a multiple of 16; dim >= 1.
  SvdqKeyCodec(size_t dim, const Schedule& schedule, size_t group);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return group_; }
  size_t code_bytes(size_t n) const override { return n / group_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }

  bool fits_streams() const override { return true; }
  // One basis per KV head, fitted to that head's keys.
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n,
                                                size_t heads) const override;
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return 2 * dim_ * rank_; }

  void encode(const float* x, size_t n, uint8_t* codes) const override;
  // Reconstructs the keys: latents times the basis (the reference path; attention scores from
  // the latents).
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a stored grid KIVI's encode cannot write (a non-finite or negative step, a non-finite
  // minimum), naming the block and the latent channel.
  void check_codes(const uint8_t* codes, size_t n) const override;
  // Prefill attends in the frame of the basis (core/latent_frame.h): a key is its rank() latents,
  // read in rank() columns, the rest zero.
  bool decodes_in_basis() const override { return basis_ != nullptr; }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override;
  void to_basis(float* x, size_t n) const override { fitted().frame.to_frame(x, n); }
  void from_basis(float* x, size_t n) const override { fitted().frame.from_frame(x, n); }
  void queries_to_basis(float* x, size_t n) const override { fitted().frame.queries_to_frame(x, n); }
  size_t basis_width() const override { return rank_; }
  bool fused_score() const override { return true; }
  // Each query is projected once on the basis (q . c v_j), then scored against each tier's codes
  // by KIVI's key kernels: no key is reconstructed.
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;

  // The layout, for tests and docs.
  size_t rank() const { return rank_; }  // latent channels stored; the rest get 0 bits
  const std::vector<LatentTier>& tiers() const { return tiers_; }
  size_t block_bytes() const { return block_bytes_; }

 private:
  const LatentBasis& fitted() const;
  // The latents of block blk's group_ tokens, [group_][rank_].
  void block_latents(const uint8_t* codes, size_t blk, float* latents, float* tier) const;
  size_t dim_, group_, rank_ = 0, block_bytes_ = 0;
  Schedule schedule_;
  std::vector<LatentTier> tiers_;
  std::shared_ptr<const LatentBasis> basis_;  // null in the prototype
};

}  // namespace veloxquant::svdq
