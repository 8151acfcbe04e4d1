#include "core/rope_run.h"

#include <cmath>
#include <vector>

namespace veloxquant {

void rope_inverse_frequencies(const RopeParams& rope, double* inv_freq) {
  for (size_t i = 0; i < rope.dims / 2; ++i) inv_freq[i] = rope_inverse_frequency(rope, i);
}

void apply_rope_run(const RopeParams& rope, float* x, size_t n, size_t head_dim, int64_t first) {
  if (n == 0) return;
  apply_rope(rope, x, 1, head_dim, first);  // checks dims, and rotates the first vector
  const size_t half = rope.dims / 2;
  if (half == 0 || n == 1) return;
  constexpr size_t kReseed = 256;
  std::vector<double> inv_freq(half), step_cos(half), step_sin(half), c(half), s(half);
  rope_inverse_frequencies(rope, inv_freq.data());
  for (size_t i = 0; i < half; ++i) step_cos[i] = std::cos(inv_freq[i]), step_sin[i] = std::sin(inv_freq[i]);
  const bool neox = rope.layout == RopeLayout::Neox;
  const double m = rope.magnitude;
  for (size_t j = 1; j < n; ++j) {
    const double p = static_cast<double>(first + static_cast<int64_t>(j));
    for (size_t i = 0; i < half; ++i) {
      if (j % kReseed == 1) {
        c[i] = std::cos(p * inv_freq[i]), s[i] = std::sin(p * inv_freq[i]);
      } else {  // angle (p - 1) + one step
        const double cn = c[i] * step_cos[i] - s[i] * step_sin[i];
        s[i] = s[i] * step_cos[i] + c[i] * step_sin[i];
        c[i] = cn;
      }
    }
    float* v = x + j * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>((x0 * c[i] - x1 * s[i]) * m);
      v[b] = static_cast<float>((x0 * s[i] + x1 * c[i]) * m);
    }
  }
}

}  // namespace veloxquant
