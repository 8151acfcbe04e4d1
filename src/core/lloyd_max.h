// Lloyd-Max scalar quantizers: the MSE-optimal 2^bits levels for a known 1-D density, solved
// numerically (alternating nearest-centroid boundaries and conditional means on a fine grid).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace veloxquant {

struct ScalarCodebook {
  std::vector<float> centroids;   // ascending, 2^bits entries
  std::vector<float> boundaries;  // ascending midpoints between centroids, 2^bits - 1 entries
  // Index of the nearest centroid.
  uint8_t quantize(float x) const;
  float value(uint8_t code) const { return centroids[code]; }
  // Expected squared error under the density it was solved for.
  double distortion = 0;
};

// REQUIRES: lo < hi, 1 <= levels <= 256, pdf >= 0 and integrable on [lo, hi].
ScalarCodebook lloyd_max(const std::function<double(double)>& pdf, double lo, double hi,
                         size_t levels);

// Standard normal scaled by sigma.
ScalarCodebook lloyd_max_gaussian(unsigned bits, double sigma = 1.0);
// Laplace(0, b): density exp(-|x|/b) / (2b).
ScalarCodebook lloyd_max_laplacian(unsigned bits, double b = 1.0);
// One coordinate of a uniformly random unit vector in R^dim (what a random rotation makes of a
// unit key): density proportional to (1 - x^2)^((dim - 3) / 2) on [-1, 1].
ScalarCodebook lloyd_max_sphere_coordinate(unsigned bits, size_t dim);

// Two-stage residual scalar quantization of N(0, 1) values (turboquant_rvq): the Gaussian
// Lloyd-Max levels, then Laplacian levels for the first stage's residual, scaled to its known
// variance (the first stage's distortion D1: Laplace scale sqrt(D1 / 2)).
struct ResidualStages {
  ScalarCodebook gaussian, laplacian;
};
ResidualStages gaussian_residual_stages(unsigned bits);
// The values of the joint codes i1 | i2 << bits: (gaussian[i1] + laplacian[i2]) * scale.
std::vector<float> residual_joint_table(const ResidualStages& s, unsigned bits, double scale);

}  // namespace veloxquant
