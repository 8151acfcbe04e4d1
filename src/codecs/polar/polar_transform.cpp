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
