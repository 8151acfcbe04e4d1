// SpectralQuant keys: a key x is stored as its norm and the codes of y = R x / ||x||, its unit
// vector in the KV head's calibrated eigenbasis (R: the eigenvectors of the unit keys'
// covariance, one per row, largest eigenvalue first). Direction j has its own ascending levels,
// 2^bits[j] of them (bits[j] from reverse water-filling on the eigenvalues, 0 bits: one level),
// and code j is the index of the level nearest y[j]. Decoding is x = ||x|| R^T l, l[j] the level
// of code j. R is orthogonal, so q . x = ||x|| (R q) . l: a query is rotated once per call and
// scored against the levels straight from the codes.
//
// Record of one token, B = bits * dim code bits in all (the allocation keeps the sum):
//   f32 ||x|| | codes, direction 0 first, each at its own width, one little-endian bit stream
//             (core/bitpack.h's order), ceil(B / 8) bytes
// The rotation, widths and levels of every KV head are calibrated (spectral_fit.h) and shared
// by the layer (state_bytes). A stream's own state (fit_streams) is only the u32 index of the KV
// head whose basis encodes it, so that states restored from a session file into another head are
// refused rather than decoded with the wrong basis.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::spectral {

// What one KV head's keys are encoded with.
struct HeadBasis {
  std::vector<float> rotation;  // [dim][dim], row j = eigen-direction j, orthonormal rows
  std::vector<unsigned> bits;   // dim widths, each <= 8, summing to the record's code bits
  std::vector<float> levels;    // each direction's 2^bits[j] ascending levels, direction 0 first
};

class SpectralKeyCodec final : public Codec {
 public:
  // The prototype make() returns: every KV head's basis. REQUIRES (checked by the method): each
  // basis shaped as above, with the same sum of bits, code_bits.
  SpectralKeyCodec(size_t dim, size_t code_bits, std::vector<HeadBasis> heads);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * stride_; }
  size_t state_bytes() const override;
  // Streams are fitted only to learn their KV head: the tables are calibrated.
  bool fits_streams() const override { return true; }
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override;
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                     size_t head) const override;
  size_t stream_state_bytes() const override { return 4; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses a norm that is negative, infinite or NaN; every code is an index into its
  // direction's complete table.
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;

  // This stream's basis; throws Error on the prototype.
  const HeadBasis& basis() const;

 private:
  // Per direction j of the stream's head: where its levels start, where its code starts.
  struct Directions {
    std::vector<uint32_t> level_offset, bit_offset;
  };
  // The level index (offset included) of every direction of the record `rec`.
  void level_indices(const uint8_t* rec, uint32_t* idx) const;

  size_t dim_, stride_;
  std::shared_ptr<const std::vector<HeadBasis>> heads_;
  size_t head_ = SIZE_MAX;  // the stream's KV head; SIZE_MAX on the prototype
  Directions dirs_;
};

// y = R x for one vector (R: [dim][dim] row-major).
void rotate(const std::vector<float>& rotation, const float* x, float* y, size_t dim);

}  // namespace veloxquant::spectral
