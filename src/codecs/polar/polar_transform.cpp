#include "codecs/polar/polar_transform.h"

#include <cmath>
#include <numbers>

namespace veloxquant::polar {

float forward(float* x, size_t levels, float* angles) {
  float* out = angles;
  for (size_t level = 1; level <= levels; ++level) {
    const size_t pairs = angles_at_level(levels, level);
    // Radius j lands at index j <= 2j, after its inputs are read and before any later pair's.
    for (size_t j = 0; j < pairs; ++j) {
      const float a = x[2 * j], b = x[2 * j + 1];
      float psi = std::atan2(b, a);
      // Level 1 sees signed coordinates: full circle. Deeper levels see radii >= 0: [0, pi/2].
      if (psi < 0) psi += static_cast<float>(2 * std::numbers::pi);
      out[j] = psi;
      x[j] = std::hypot(a, b);
    }
    out += pairs;
  }
  return x[0];
}

AngleCells::AngleCells(const std::vector<float>& boundaries) {
  const double pi = std::numbers::pi;
  for (float beta : boundaries) {
    const bool upper = beta >= pi;
    const double angle = upper ? beta - pi : beta;
    (upper ? upper_cos : lower_cos).push_back(static_cast<float>(std::cos(angle)));
    (upper ? upper_sin : lower_sin).push_back(static_cast<float>(std::sin(angle)));
  }
}

void forward_level_cells(float* x, size_t pairs, const AngleCells& cells, uint8_t* codes, float* scratch) {
  float *a = scratch, *b = a + pairs, *upper = b + pairs, *count = upper + pairs;
  const auto lower_count = static_cast<float>(cells.lower_cos.size());
  for (size_t j = 0; j < pairs; ++j) {
    const float aj = x[2 * j], bj = x[2 * j + 1];
    x[j] = std::sqrt(aj * aj + bj * bj);
    // atan2's convention: psi in [pi, 2pi) for b < 0, and for b = 0 only when a < 0.
    const bool up = bj < 0 || (bj == 0 && aj < 0);
    a[j] = up ? -aj : aj, b[j] = up ? -bj : bj;
    upper[j] = up ? 1.0f : 0.0f;
    count[j] = up ? lower_count : 0.0f;
  }
  for (size_t k = 0; k < cells.lower_cos.size(); ++k) {
    const float c = cells.lower_cos[k], s = cells.lower_sin[k];
    for (size_t j = 0; j < pairs; ++j) count[j] += upper[j] == 0 && b[j] * c - a[j] * s > 0 ? 1.0f : 0.0f;
  }
  for (size_t k = 0; k < cells.upper_cos.size(); ++k) {
    const float c = cells.upper_cos[k], s = cells.upper_sin[k];
    for (size_t j = 0; j < pairs; ++j) count[j] += upper[j] != 0 && b[j] * c - a[j] * s > 0 ? 1.0f : 0.0f;
  }
  for (size_t j = 0; j < pairs; ++j) codes[j] = static_cast<uint8_t>(count[j]);
}

void inverse_level(const float* __restrict radii, size_t pairs, const uint8_t* __restrict codes,
                   const float* __restrict cosines, const float* __restrict sines, float* __restrict out) {
  for (size_t j = 0; j < pairs; ++j) {
    out[2 * j] = radii[j] * cosines[codes[j]];
    out[2 * j + 1] = radii[j] * sines[codes[j]];
  }
}

void inverse(float radius, const float* cosines, const float* sines, size_t levels, float* x) {
  // Walk down from the last level: each radius splits into (r cos psi, r sin psi). Going through
  // the pairs from the last, radius j is read before indices 2j, 2j + 1 >= j are written.
  x[0] = radius;
  size_t offset = (size_t{1} << levels) - 1;
  for (size_t level = levels; level >= 1; --level) {
    const size_t pairs = angles_at_level(levels, level);
    offset -= pairs;
    for (size_t j = pairs; j-- > 0;) {
      const float r = x[j];
      x[2 * j] = r * cosines[offset + j];
      x[2 * j + 1] = r * sines[offset + j];
    }
  }
}

}  // namespace veloxquant::polar
