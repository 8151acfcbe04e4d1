#include "codecs/turboquant/turboquant_rvq_codec.h"

#include <cmath>
#include <vector>

#include "codecs/turboquant/nearest_level.h"

namespace veloxquant::turboquant {

TurboQuantRvqCodec::TurboQuantRvqCodec(size_t dim, unsigned bits, uint64_t rotation_seed)
    : TurboQuantRvqCodec(dim, bits, solve(bits), rotation_seed) {}

TurboQuantRvqCodec::TurboQuantRvqCodec(size_t dim, unsigned bits, Stages stages,
                                       uint64_t rotation_seed)
    : RotatedTableCodec(dim, 2 * bits, joint_table(stages, bits, dim), rotation_seed,
                        2 * (size_t{1} << bits) * sizeof(float)),
      bits_(bits), scale_(static_cast<float>(std::sqrt(static_cast<double>(dim)))),
      stages_(std::move(stages)) {}

TurboQuantRvqCodec::Stages TurboQuantRvqCodec::solve(unsigned bits) {
  Stages s;
  s.gaussian = lloyd_max_gaussian(bits);
  // Laplace(0, b) has variance 2 b^2; match it to the stage-1 residual variance.
  s.laplacian = lloyd_max_laplacian(bits, std::sqrt(s.gaussian.distortion / 2));
  return s;
}

std::vector<float> TurboQuantRvqCodec::joint_table(const Stages& s, unsigned bits, size_t dim) {
  const size_t levels = size_t{1} << bits;
  const double inv_scale = 1.0 / std::sqrt(static_cast<double>(dim));
  std::vector<float> table(levels * levels);
  for (size_t i2 = 0; i2 < levels; ++i2)
    for (size_t i1 = 0; i1 < levels; ++i1)
      table[i1 | i2 << bits] = static_cast<float>(
          (static_cast<double>(s.gaussian.centroids[i1]) + s.laplacian.centroids[i2]) * inv_scale);
  return table;
}

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
