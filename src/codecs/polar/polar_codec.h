// PolarQuant (Han, Kacham, Karbasi, Mirrokni & Zandieh, arXiv 2502.02617): a random rotation
// makes the coordinates near-Gaussian, each block of 2^levels rotated coordinates goes through the
// recursive polar transform, its 2^levels - 1 angles are quantized with Lloyd-Max codebooks of
// their known distributions, and the block's radius is kept in fp16 (as radius / sqrt(dim)). No per-block scale or zero
// point is needed: the angle distributions do not depend on the data.
//
// score() and accumulate() work in the rotated frame: the queries are rotated once per call and
// the weighted value sum is rotated back once per query, so no token pays for a rotation.
#pragma once

#include <cstdint>
#include <vector>

#include "codecs/polar/polar_transform.h"
#include "core/lloyd_max.h"
#include "core/rotation.h"
#include "veloxquant/codec.h"

namespace veloxquant {

struct PolarConfig {
  size_t dim = 128;
  size_t levels = 4;        // recursion depth; one radius per 2^levels coordinates
  unsigned level1_bits = 4;  // bits of the level-1 angles (uniform on [0, 2pi))
  unsigned bits = 2;        // bits of the angles of levels 2.. (concentrated near pi/4)
  uint64_t seed = 0;
};

class PolarCodec final : public Codec {
 public:
  // Throws SpecError when 2^levels does not divide dim or bits are out of 1..8 (the method caps
  // levels at the factors of two in head_dim before it gets here).
  explicit PolarCodec(const PolarConfig& config);

  size_t dim() const override { return cfg_.dim; }
  size_t code_bytes(size_t n) const override { return n * token_bytes_; }
  // Rotation state plus the angle codebooks and their cosine/sine tables, as held.
  size_t state_bytes() const override;
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;
  // Refuses a stored radius that is negative, infinite or NaN (encode stores a norm / sqrt(dim)).
  void check_codes(const uint8_t* codes, size_t n) const override;
  // The rotated frame as the codec's basis: prefill attends there (Codec::decodes_in_basis).
  bool decodes_in_basis() const override { return true; }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override {
    decode_rotated(codes, n, y);
  }
  void to_basis(float* x, size_t n) const override { rotation_.forward(x, n); }
  void from_basis(float* x, size_t n) const override { rotation_.inverse(x, n); }
  // True where the 16-lane table kernels apply (AVX-512, angle codes of at most 4 bits).
  bool fused_score() const override;
  bool fused_accumulate() const override { return fused_score(); }

 private:
  struct Level {
    unsigned bits;
    size_t angles;       // angles of this level in one token (all blocks)
    size_t bit_offset;   // of its packed codes within a token's record (levels follow each
                         // other in one bit stream, so no level rounds up to a whole byte)
    const ScalarCodebook* codebook;  // shared, lives for the process
    std::vector<float> cosines, sines;  // of each centroid
    polar::AngleCells cells{{}};        // the codebook's boundaries as the encoder tests them
  };
  // Reconstructs n tokens in the rotated frame (no inverse rotation).
  void decode_rotated(const uint8_t* codes, size_t n, float* y) const;
  // The rotated-frame score / accumulate of the first tokens, 16 at a time (one per lane) where
  // AVX-512 is available and the codes fit its 16-entry table lookups. Return how many tokens they
  // did (a multiple of 16, 0 elsewhere); the callers decode the rest.
  size_t score_lanes(const float* rq, size_t nq, const uint8_t* codes, size_t n, float* scores) const;
  size_t accumulate_lanes(const float* w, size_t nq, const uint8_t* codes, size_t n, float* acc) const;
  struct Lanes;  // their per-call state (polar_codec.cpp)

  PolarConfig cfg_;
  size_t block_ = 16, blocks_ = 8, radius_offset_ = 0, token_bytes_ = 0;
  float sqrt_dim_ = 1, inv_sqrt_dim_ = 1;  // radii are stored divided by sqrt(dim) (fp16 range)
  Rotation rotation_;
  std::vector<Level> levels_;
};

}  // namespace veloxquant
