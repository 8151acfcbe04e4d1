#include <cmath>
#include <string>

#include "core/rope_run.h"
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
  // its fractional bits, and the rotation must not depend on that. The frequencies depend only
  // on the parameters, so each thread keeps the last set (queries and keys, every layer and
  // token of a model share one) instead of calling pow per pair per call.
  thread_local RopeParams cached{};
  thread_local double inv_freq[512];
  if (!(cached == rope)) {
    rope_inverse_frequencies(rope, inv_freq);
    cached = rope;
  }
  double cos_t[512], sin_t[512];
  const double p = static_cast<double>(pos);
  for (size_t i = 0; i < half; ++i) {
    cos_t[i] = std::cos(p * inv_freq[i]);
    sin_t[i] = std::sin(p * inv_freq[i]);
  }
  const bool neox = rope.layout == RopeLayout::Neox;
  const double m = rope.magnitude;  // 1 but with YaRN: multiplying by it is then exact
  for (size_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>((x0 * cos_t[i] - x1 * sin_t[i]) * m);
      v[b] = static_cast<float>((x0 * sin_t[i] + x1 * cos_t[i]) * m);
    }
  }
}

}  // namespace veloxquant
