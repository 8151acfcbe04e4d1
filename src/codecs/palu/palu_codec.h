// Palu (Chang et al., "Palu: Compressing KV-Cache with Low-Rank Projection", ICLR 2025,
// arXiv 2407.21118), adapted to a cache that sees keys and values rather than the projection
// weights: each group of KV heads gets one orthonormal rank-r basis B ([dim][r]) fitted to its
// vectors at prefill (palu_basis.h), and every token is stored as its latent B^T x, quantized per
// token at mixed bit-widths.
//
// Token record (block_tokens() == 1), the parts in this order, an empty part (hi == 0 or
// hi == rank) taking no bytes:
//   fp16 min, fp16 step           grid of the hi part: latents [0, hi), the leading singular
//                                 directions (common/affine_grid.h: min rounded down, step up)
//   fp16 min, fp16 step           grid of the lo part: latents [hi, rank)
//   hi * hi_bits bits             codes of the hi part, one little-endian bit stream
//                                 (core/bitpack.h), padded to a byte
//   (rank - hi) * lo_bits bits    codes of the lo part, likewise
// The grids quantize the latents in units of unit() = the smallest power of two >= 2 sqrt(dim):
// a latent is at most the vector's norm, at most sqrt(dim) * 65504, so every stored min and step
// is finite in fp16 and scaling by a power of two loses nothing.
//
// The stream state (fit_streams / with_states): the group's first head stores B in fp16,
// [dim][r] row-major (every entry within [-1, 1]); the group's other heads store nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/latent_frame.h"
#include "veloxquant/codec.h"

namespace veloxquant::palu {

struct PaluConfig {
  size_t dim = 128;
  size_t rank = 64;        // latent channels, 1..dim
  size_t hi = 16;          // leading latent channels at hi_bits, 0..rank
  unsigned hi_bits = 4;    // 1..8
  unsigned lo_bits = 2;    // 1..8
  bool hadamard = true;    // Walsh-Hadamard on each part's latents, folded into B
  size_t group = 1;        // heads sharing one basis (>= 1; at most the heads fitted)
  std::string stream = "key";  // names the stream in errors
};

class PaluCodec final : public Codec {
 public:
  // The prototype make() returns: sizes, fitting and check_codes; encode, decode, score and
  // accumulate of any token throw Error (there is no basis yet). REQUIRES (checked by the method) the ranges
  // of PaluConfig.
  explicit PaluCodec(PaluConfig cfg);

  size_t dim() const override { return cfg_.dim; }
  size_t code_bytes(size_t n) const override { return n * token_bytes_; }
  // The basis lives in the streams' states (CacheStream::state), not in the codec.
  size_t state_bytes() const override { return 0; }
  size_t stream_state_bytes() const override { return 2 * cfg_.dim * cfg_.rank; }

  bool fits_streams() const override { return true; }
  // x: [n, heads, dim]. One basis per group of min(group, heads) consecutive heads (the last
  // group smaller when that does not divide heads), in the state of the group's first head; the
  // others' states are empty.
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  // One state per head, as fit_streams() returned them. Refuses a head out of range, a state of
  // the wrong size, and a basis that is not finite, has an entry beyond [-1, 1] or columns that
  // are not orthonormal within fp16 rounding.
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;

  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a stored step that is not finite or negative and a minimum that is not finite.
  void check_codes(const uint8_t* codes, size_t n) const override;

  // In latent space: the queries are projected once (B^T q), scored against the dequantized
  // latents, and the weighted latent sums are projected back once per query.
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const override;

  // Prefill attends in the frame of unit() B completed to a basis (core/latent_frame.h), where a
  // token is its latents followed by zeros: no product with B per stored token, and products over
  // rank channels instead of dim.
  bool decodes_in_basis() const override { return !frame_.empty(); }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override;
  void to_basis(float* x, size_t n) const override { frame_.to_frame(x, n); }
  void from_basis(float* x, size_t n) const override { frame_.from_frame(x, n); }
  void queries_to_basis(float* x, size_t n) const override { frame_.queries_to_frame(x, n); }
  size_t basis_width() const override { return cfg_.rank; }

  // The layout, for tests and docs.
  const PaluConfig& config() const { return cfg_; }
  size_t token_bytes() const { return token_bytes_; }
  float unit() const { return unit_; }
  // Latents of n tokens, dequantized, in units of unit(): token t's at y + t * stride (rank when
  // stride is 0), the other entries of a row of more than rank untouched.
  void latents(const uint8_t* codes, size_t n, float* y, size_t stride = 0) const;
  // The fitted basis ([dim][rank], as stored); empty in the prototype.
  const std::vector<float>& basis() const { return basis_; }

 private:
  struct Part {
    size_t first, count;
    unsigned bits;
    size_t grid_offset, code_offset;  // bytes within a token record
    const char* name;                 // in errors
  };
  PaluCodec(PaluConfig cfg, std::vector<float> basis);
  void require_basis(const char* what, size_t n) const;
  std::vector<float> basis_from_state(const std::vector<uint8_t>& state, size_t leader) const;

  PaluConfig cfg_;
  std::vector<Part> parts_;
  size_t token_bytes_ = 0;
  float unit_ = 1;
  std::vector<float> basis_;   // B, [dim][rank]
  std::vector<float> basis_t_; // B^T, [rank][dim]
  LatentFrame frame_;          // of unit() B; empty in the prototype
};

}  // namespace veloxquant::palu
