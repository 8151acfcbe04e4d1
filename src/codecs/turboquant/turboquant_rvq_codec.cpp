#include "codecs/turboquant/turboquant_rvq_codec.h"

#include <cmath>
#include <vector>

#include "codecs/turboquant/nearest_level.h"

namespace veloxquant::turboquant {

TurboQuantRvqCodec::TurboQuantRvqCodec(size_t dim, unsigned bits, uint64_t rotation_seed)
    : TurboQuantRvqCodec(dim, bits, gaussian_residual_stages(bits), rotation_seed) {}

TurboQuantRvqCodec::TurboQuantRvqCodec(size_t dim, unsigned bits, ResidualStages stages,
                                       uint64_t rotation_seed)
    : RotatedTableCodec(dim, 2 * bits,
                        residual_joint_table(stages, bits, 1.0 / std::sqrt(static_cast<double>(dim))),
                        rotation_seed, 2 * (size_t{1} << bits) * sizeof(float)),
      bits_(bits),
      scale_(stage_scale(dim)),
      stages_(std::move(stages)) {}

void TurboQuantRvqCodec::choose_codes(const float* y, uint8_t* codes) const {
  const size_t d = dim();
  std::vector<float> u(d);
  std::vector<uint8_t> second(d);
  for (size_t c = 0; c < d; ++c) u[c] = scale_ * y[c];
  nearest_levels(stages_.gaussian, u.data(), d, codes);
  for (size_t c = 0; c < d; ++c) u[c] -= stages_.gaussian.value(codes[c]);  // stage-1 residual
  nearest_levels(stages_.laplacian, u.data(), d, second.data());
  for (size_t c = 0; c < d; ++c) codes[c] = static_cast<uint8_t>(codes[c] | second[c] << bits_);
}

}  // namespace veloxquant::turboquant
