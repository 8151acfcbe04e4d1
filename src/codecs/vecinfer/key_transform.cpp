#include "codecs/vecinfer/key_transform.h"

#include <algorithm>
#include <cmath>

namespace veloxquant::vecinfer {
namespace {
constexpr uint64_t kRotationSeed = 0x7665'6369'6e66'6572;  // "vecinfer"
}  // namespace

Rotation key_rotation(size_t dim) { return Rotation(dim, kRotationSeed); }

std::vector<float> smoothing_factors(const float* keys, size_t tokens, size_t stride, size_t dim) {
  std::vector<float> peak(dim, 0.0f);
  for (size_t t = 0; t < tokens; ++t)
    for (size_t c = 0; c < dim; ++c) peak[c] = std::max(peak[c], std::fabs(keys[t * stride + c]));
  for (float& p : peak) p = p > 0 ? std::sqrt(p) : 1.0f;
  return peak;
}

void transform_keys(const Rotation& r, std::span<const float> smooth, float* x, size_t rows) {
  const size_t d = smooth.size();
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < d; ++c) x[i * d + c] /= smooth[c];
  r.forward(x, rows);
}

void transform_queries(const Rotation& r, std::span<const float> smooth, float* q, size_t rows) {
  const size_t d = smooth.size();
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < d; ++c) q[i * d + c] *= smooth[c];
  r.forward(q, rows);
}

void restore_keys(const Rotation& r, std::span<const float> smooth, float* y, size_t rows) {
  const size_t d = smooth.size();
  r.inverse(y, rows);
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < d; ++c) y[i * d + c] *= smooth[c];
}

}  // namespace veloxquant::vecinfer
