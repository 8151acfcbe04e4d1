#include <cmath>
#include <string>

#include "veloxquant/error.h"
#include "veloxquant/rope.h"

namespace veloxquant {

void apply_rope(const RopeParams& rope, float* x, size_t heads, size_t head_dim, int64_t pos) {
  if (rope.dims % 2 != 0 || rope.dims > head_dim || rope.dims > 1024) {
    throw Error("rope dimension count " + std::to_string(rope.dims) +
                " is not supported; expected an even number <= head_dim " + std::to_string(head_dim) +
                " and <= 1024");
  }
  const size_t half = rope.dims / 2;
  if (half == 0) return;
  // Angles in double: at positions in the hundreds of thousands a float angle has lost most of
  // its fractional bits, and the rotation must not depend on that.
  double cos_t[512], sin_t[512];
  const double p = static_cast<double>(pos) * rope.freq_scale;
  for (size_t i = 0; i < half; ++i) {
    const double theta =
        p * std::pow(static_cast<double>(rope.freq_base), -2.0 * static_cast<double>(i) / rope.dims);
    cos_t[i] = std::cos(theta);
    sin_t[i] = std::sin(theta);
  }
  const bool neox = rope.layout == RopeLayout::Neox;
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>(x0 * cos_t[i] - x1 * sin_t[i]);
      v[b] = static_cast<float>(x0 * sin_t[i] + x1 * cos_t[i]);
    }
  }
}

}  // namespace veloxquant
