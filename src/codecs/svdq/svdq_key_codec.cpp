#include "codecs/svdq/svdq_key_codec.h"

#include <algorithm>
#include <string>

#include "codecs/common/affine_grid.h"
#include "core/simd.h"
#include "veloxquant/error.h"

namespace veloxquant::svdq {

SvdqKeyCodec::SvdqKeyCodec(size_t dim, const Schedule& schedule, size_t group)
    : dim_(dim), group_(group), schedule_(schedule) {
  for (size_t p = 0; p < kParts; ++p) {
    // Parts round up, so the leading part is never empty, even when head_dim < 8.
    const size_t first = (p * dim + kParts - 1) / kParts, end = ((p + 1) * dim + kParts - 1) / kParts;
    if (schedule[p] == 0 || end == first) continue;
    if (!tiers_.empty() && tiers_.back().bits == schedule[p]) tiers_.back().count += end - first;
    else tiers_.push_back({first, end - first, schedule[p], 0, nullptr});
    rank_ = end;
  }
  for (LatentTier& t : tiers_) {
    t.codes = std::make_shared<kivi::KiviKeyCodec>(t.count, t.bits, group);
    t.offset = block_bytes_;
    block_bytes_ += t.codes->code_bytes(group);
  }
}

std::vector<std::vector<uint8_t>> SvdqKeyCodec::fit_streams(const float* x, size_t n,
                                                            size_t heads) const {
  std::vector<std::vector<uint8_t>> states(heads);
  for (size_t h = 0; h < heads; ++h) states[h] = fit_basis_state(x + h * dim_, n, heads * dim_, dim_, rank_);
  return states;
}

std::unique_ptr<Codec> SvdqKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                 size_t head) const {
  if (head >= states.size()) {
    throw Error("svdq: no key basis for head " + std::to_string(head) + " among " +
                std::to_string(states.size()) + " stream states; expected one per KV head");
  }
  auto codec = std::make_unique<SvdqKeyCodec>(dim_, schedule_, group_);
  codec->basis_ = std::make_shared<const LatentBasis>(read_basis_state(states[head], dim_, rank_, head));
  return codec;
}

const LatentBasis& SvdqKeyCodec::fitted() const {
  if (!basis_) {
    throw Error("svdq: this key codec is the prototype make() returns and has no fitted basis; "
                "expected the codec with_states() builds from fit_streams()");
  }
  return *basis_;
}

void SvdqKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const LatentBasis& b = fitted();
  std::vector<float> latents(group_ * rank_), tier(group_ * rank_);
  for (size_t blk = 0; blk < n / group_; ++blk) {
    simd::dot_f32_rows(x + blk * group_ * dim_, group_, b.down.data(), rank_, dim_, latents.data());
    for (const LatentTier& t : tiers_) {
      for (size_t i = 0; i < group_; ++i)
        std::copy_n(latents.data() + i * rank_ + t.first, t.count, tier.data() + i * t.count);
      t.codes->encode(tier.data(), group_, codes + blk * block_bytes_ + t.offset);
    }
  }
}

void SvdqKeyCodec::block_latents(const uint8_t* codes, size_t blk, float* latents, float* tier) const {
  for (const LatentTier& t : tiers_) {
    t.codes->decode(codes + blk * block_bytes_ + t.offset, group_, tier);
    for (size_t i = 0; i < group_; ++i)
      std::copy_n(tier + i * t.count, t.count, latents + i * rank_ + t.first);
  }
}

void SvdqKeyCodec::decode_in_basis(const uint8_t* codes, size_t n, float* y) const {
  fitted();
  std::vector<float> latents(group_ * rank_), tier(group_ * rank_);
  for (size_t blk = 0; blk < n / group_; ++blk) {
    block_latents(codes, blk, latents.data(), tier.data());
    for (size_t i = 0; i < group_; ++i)
      std::copy_n(latents.data() + i * rank_, rank_, y + (blk * group_ + i) * dim_);
  }
}

void SvdqKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const LatentBasis& b = fitted();
  std::vector<float> latents(group_ * rank_), tier(group_ * rank_);
  for (size_t blk = 0; blk < n / group_; ++blk) {
    block_latents(codes, blk, latents.data(), tier.data());
    float* xb = x + blk * group_ * dim_;
    std::fill_n(xb, group_ * dim_, 0.0f);
    simd::accumulate_f32_rows(latents.data(), group_, b.up.data(), rank_, dim_, xb);
  }
}

void SvdqKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t blk = 0; blk < n / group_; ++blk)
    for (const LatentTier& t : tiers_) {
      const auto* halves = reinterpret_cast<const uint16_t*>(codes + blk * block_bytes_ + t.offset);
      try {
        check_stored_grids(halves, halves + t.count, t.count, "key", blk);  // scales, then mins
      } catch (const Error& e) {
        throw Error("svdq: latent channels " + std::to_string(t.first) + ".." +
                    std::to_string(t.first + t.count - 1) + " (" + std::to_string(t.bits) +
                    " bits; parameter i is latent channel " + std::to_string(t.first) + " + i): " + e.what());
      }
    }
}

void SvdqKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                         float* scores) const {
  const LatentBasis& b = fitted();
  // q . x = sum_j (q . c v_j) y_j: each query once onto the basis, then split by tier.
  std::vector<float> projected(nq * rank_);
  simd::dot_f32_rows(q, nq, b.up.data(), rank_, dim_, projected.data());
  std::vector<std::vector<float>> folded(tiers_.size());
  for (size_t k = 0; k < tiers_.size(); ++k) {
    const LatentTier& t = tiers_[k];
    folded[k].resize(nq * t.count);
    for (size_t i = 0; i < nq; ++i)
      std::copy_n(projected.data() + i * rank_ + t.first, t.count, folded[k].data() + i * t.count);
  }
  for (size_t i = 0; i < nq; ++i) std::fill_n(scores + i * n, n, 0.0f);
  std::vector<float> part(nq * group_);
  for (size_t blk = 0; blk < n / group_; ++blk)
    for (size_t k = 0; k < tiers_.size(); ++k) {
      tiers_[k].codes->score(folded[k].data(), nq, codes + blk * block_bytes_ + tiers_[k].offset, group_,
                             part.data());
      for (size_t i = 0; i < nq; ++i)
        for (size_t t = 0; t < group_; ++t) scores[i * n + blk * group_ + t] += part[i * group_ + t];
    }
}

}  // namespace veloxquant::svdq
