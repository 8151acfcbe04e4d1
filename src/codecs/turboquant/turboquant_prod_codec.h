// turboquant_prod (TurboQuant Algorithm 2): a (bits-1)-bit turboquant_mse code plus a 1-bit QJL
// sketch of its residual, which makes q . x an unbiased estimate of the true inner product.
//
// With y = R x / ||x||, y_mse = table[codes] and r = y - y_mse (all in the rotated space):
//   stored per token: [f32 ||x||][f32 rho = ||x|| ||r||][dim codes of bits-1 bits][dim sign bits
//   z = sign(S r)], S a dim x dim i.i.d. N(0, 1) matrix;
//   decoded: x = R^T (||x|| y_mse + sqrt(pi/2) / dim * rho * S^T z).
// The paper applies S to the residual in the original space; S R^T is again an i.i.d. Gaussian
// matrix independent of R, so drawing S in the rotated space gives the same estimator.
// bits = 1 is the paper's pure-QJL case: no MSE codes, r = y.
#pragma once

#include <optional>

#include "codecs/common/packed_code_kernel.h"
#include "core/lloyd_max.h"
#include "core/rotation.h"
#include "veloxquant/codec.h"

namespace veloxquant::turboquant {

class TurboQuantProdCodec final : public Codec {
 public:
  // REQUIRES: dim >= 2, 1 <= bits <= 8.
  TurboQuantProdCodec(size_t dim, unsigned bits, uint64_t rotation_seed, uint64_t sketch_seed);
  // With the (bits-1)-bit sphere-coordinate codebook already solved: many codecs share it.
  TurboQuantProdCodec(size_t dim, unsigned bits, const ScalarCodebook& mse_codebook,
                      uint64_t rotation_seed, uint64_t sketch_seed);

  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * stride_; }
  size_t state_bytes() const override;
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Prefill attends in the rotated basis, where no token is rotated back.
  bool decodes_in_basis() const override { return true; }
  void decode_in_basis(const uint8_t* codes, size_t n, float* y) const override;
  void to_basis(float* x, size_t n) const override { rotation_.forward(x, n); }
  void from_basis(float* x, size_t n) const override { rotation_.inverse(x, n); }
  // Refuses a norm or residual norm that is negative, infinite or NaN.
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;

  // The (bits-1)-bit codebook this codec needs; bits = 1 gives the single level 0.
  static ScalarCodebook mse_codebook(unsigned bits, size_t dim);
  // S, dim x dim row-major, drawn from sketch_seed as the codec draws it (the CUDA backend's
  // tables repeat it).
  static std::vector<float> sketch_matrix(size_t dim, uint64_t sketch_seed);

 private:
  void sketch(const float* v, float* out) const;             // out = S v
  void sketch_transpose(const float* v, float* out) const;   // out += S^T v

  size_t dim_;
  unsigned mse_bits_;
  ScalarCodebook codebook_;
  Rotation rotation_;
  std::vector<float> sketch_;  // S, dim x dim row-major
  float qjl_factor_;           // sqrt(pi/2) / dim
  size_t mse_bytes_, stride_;
  RecordFormat mse_format_, sign_format_;
  std::optional<PackedCodeKernel> mse_kernel_;  // absent when bits = 1
  PackedCodeKernel sign_kernel_;                // table {-1, +1}
};

}  // namespace veloxquant::turboquant
