// turboquant_rvq: two-stage residual scalar quantization after the random rotation, with no
// calibration. Stage 1 quantizes u = sqrt(dim) * y (y the rotated unit vector, so u is close to
// N(0, 1) per coordinate) with the Gaussian Lloyd-Max codebook; stage 2 quantizes the stage-1
// residual with the Laplacian Lloyd-Max codebook scaled to the residual's known variance (the
// stage-1 distortion D1: Laplace scale sqrt(D1 / 2)).
//
// Stored per token: f32 norm, then dim joint codes of 2 * bits bits, code = i1 | i2 << bits
// (i1 the stage-1 index, i2 the stage-2 index), bit-packed. The joint code indexes one table of
// (c1[i1] + c2[i2]) / sqrt(dim), so decoding and attention are the same as turboquant_mse's.
#pragma once

#include <cmath>

#include "codecs/turboquant/rotated_table_codec.h"
#include "core/lloyd_max.h"

namespace veloxquant::turboquant {

class TurboQuantRvqCodec final : public RotatedTableCodec {
 public:
  // REQUIRES: dim >= 1, 1 <= bits <= 4 (bits per stage).
  TurboQuantRvqCodec(size_t dim, unsigned bits, uint64_t rotation_seed);

  // sqrt(dim) in f32: stage 1 quantizes u = stage_scale(dim) * y (unit-vector coordinates to
  // unit variance). The stages are gaussian_residual_stages(bits) (core/lloyd_max.h); the joint
  // table is residual_joint_table(stages, bits, 1 / sqrt(dim)).
  static float stage_scale(size_t dim) { return static_cast<float>(std::sqrt(static_cast<double>(dim))); }

 private:
  TurboQuantRvqCodec(size_t dim, unsigned bits, ResidualStages stages, uint64_t rotation_seed);
  void choose_codes(const float* y, uint8_t* codes) const override;

  unsigned bits_;
  float scale_;  // stage_scale(dim)
  ResidualStages stages_;
};

}  // namespace veloxquant::turboquant
