// turboquant_mse (TurboQuant Algorithm 1): rotate, then quantize every coordinate of the rotated
// unit vector with the Lloyd-Max codebook of that coordinate's exact distribution (a scaled Beta,
// Gaussian-like for large dim). Stores the f32 norm plus dim codes of `bits` bits.
#pragma once

#include "codecs/turboquant/rotated_table_codec.h"
#include "core/lloyd_max.h"

namespace veloxquant::turboquant {

class TurboQuantMseCodec final : public RotatedTableCodec {
 public:
  // REQUIRES: dim >= 2, 1 <= bits <= 8.
  TurboQuantMseCodec(size_t dim, unsigned bits, uint64_t rotation_seed);
  // With a codebook already solved for (bits, dim): many codecs of one shape share it.
  TurboQuantMseCodec(size_t dim, const ScalarCodebook& codebook, uint64_t rotation_seed);

 private:
  void choose_codes(const float* y, uint8_t* codes) const override;

  ScalarCodebook codebook_;
};

}  // namespace veloxquant::turboquant
