// CommVQ keys (Li et al., ICML 2025, arXiv 2506.18879): a key k, taken BEFORE RoPE, is stored as
// the sum of one centroid from each of B codebooks (additive VQ), the index of codebook b's
// centroid chosen greedily on the residual k - c_0 - ... - c_{b-1} (residual VQ).
//
// Why RoPE can wait until attention: every coordinate pair of a centroid (the pairs RoPE rotates)
// is one complex number z, acting as the 2x2 block [[x, -y], [y, x]], and RoPE at position p
// multiplies each pair by e^{i theta p}. Complex products commute, so R(p) decode(codes) is the
// decode of the same codes with every centroid rotated by R(p), and since R(p) is orthogonal the
// greedy search picks the same codes for R(p) k from the rotated codebooks as for k from the
// plain ones: one codebook, trained on pre-RoPE keys, serves every position, and the cache rotates
// the decoded key to its token's position when it attends (KVCache, MethodInfo::keys_before_rope).
//
// Centroid 0 of every codebook is the origin (comm_vq_fit.h): the search picks it for a zero
// residual, so a zero key is stored and decoded as exactly zero.
//
// Record of one token: B u8 centroid indices, codebook order (bits <= 8: one byte each).
// Shared per layer (state_bytes): every KV head's codebooks, fp16, [B][2^bits][dim]. A stream's
// own state (fit_streams) is only the u32 index of its KV head, so that states restored from a
// session file into another head are refused rather than decoded with the wrong codebooks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::comm_vq {

// One KV head's codebooks: [books][entries][dim] floats, each an fp16 value.
using Codebooks = std::vector<float>;

// Greedy residual encoding of one vector x ([dim]) against `books` codebooks of `entries`
// centroids; norms[b * entries + e] = ||centroid e of codebook b||^2. Writes the books indices
// to codes and returns ||x - decode(codes)||^2.
double encode_residual(const float* x, const float* codebooks, const float* norms, size_t books,
                       size_t entries, size_t dim, uint8_t* codes);
// norms for encode_residual.
std::vector<float> centroid_norms(const Codebooks& codebooks, size_t dim);
// x = sum over codebooks b of centroid codes[b] of codebook b.
void decode_sum(const uint8_t* codes, const float* codebooks, size_t books, size_t entries,
                size_t dim, float* x);

class CommVqKeyCodec final : public Codec {
 public:
  // The prototype make() returns, holding every KV head's calibrated codebooks. REQUIRES (checked
  // by the method): 1 <= books, 2 <= entries <= 256, each head's codebooks shaped as above.
  CommVqKeyCodec(size_t dim, size_t books, size_t entries, std::vector<Codebooks> heads);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * books_; }
  size_t state_bytes() const override { return 2 * heads_->size() * books_ * entries_ * dim_; }
  // Streams are fitted only to learn their KV head: the codebooks are calibrated.
  bool fits_streams() const override { return true; }
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return 4; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses an index >= entries (only possible below 256 entries).
  void check_codes(const uint8_t* codes, size_t n) const override;

 private:
  const Codebooks& codebooks() const;  // this stream's; throws on the prototype

  size_t dim_, books_, entries_;
  std::shared_ptr<const std::vector<Codebooks>> heads_;
  size_t head_ = SIZE_MAX;  // the stream's KV head; SIZE_MAX on the prototype
  std::vector<float> norms_;  // the stream's centroid norms (encode_residual)
};

}  // namespace veloxquant::comm_vq
