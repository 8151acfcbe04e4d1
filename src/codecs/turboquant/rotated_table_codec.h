// The storage shared by turboquant_mse and turboquant_rvq: each token is one record
//   [f32 norm ||x||][dim codes of `code_bits` bits, bit-packed]
// and decodes to x = ||x|| * R^T t, t[c] = table[code[c]], with R a random rotation. Subclasses
// only choose the codes of a rotated unit vector; storage, decoding and the fused attention
// paths (queries rotated once per call, sums inverse-rotated once per call) live here.
#pragma once

#include <cstdint>
#include <vector>

#include "codecs/common/packed_code_kernel.h"
#include "core/rotation.h"
#include "veloxquant/codec.h"

namespace veloxquant::turboquant {

class RotatedTableCodec : public Codec {
 public:
  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * format_.stride; }
  size_t state_bytes() const override { return rotation_.state_bytes() + codebook_bytes_; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // The rotated basis: norm * table[code], no inverse rotation.
  bool decodes_in_basis() const override { return true; }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override;
  void to_basis(float* x, size_t n) const override { rotation_.forward(x, n); }
  void from_basis(float* x, size_t n) const override { rotation_.inverse(x, n); }
  // Refuses a norm that is negative, infinite or NaN (encode stores ||x|| of a finite x).
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;

 protected:
  // table: 2^code_bits values of a rotated unit vector's coordinates. codebook_bytes: what the
  // subclass's codebooks occupy, counted in state_bytes().
  RotatedTableCodec(size_t dim, unsigned code_bits, std::vector<float> table,
                    uint64_t rotation_seed, size_t codebook_bytes);
  // Codes of one rotated vector y (dim floats) of norm 1, or all zeros for a zero input.
  virtual void choose_codes(const float* y, uint8_t* codes) const = 0;

 private:
  size_t dim_;
  unsigned code_bits_;
  std::vector<float> table_;
  Rotation rotation_;
  size_t codebook_bytes_;
  RecordFormat format_;
  PackedCodeKernel kernel_;
};

// y = R x / ||x|| for one vector, returning ||x|| (y = 0 when x = 0).
float rotate_to_unit(const Rotation& rotation, const float* x, float* y);

}  // namespace veloxquant::turboquant
