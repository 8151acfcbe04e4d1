#include "codecs/minicache/slerp.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace veloxquant::minicache {

double angle_between(const float* a, const float* b, size_t d) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t c = 0; c < d; ++c) {
    ab += static_cast<double>(a[c]) * b[c];
    aa += static_cast<double>(a[c]) * a[c];
    bb += static_cast<double>(b[c]) * b[c];
  }
  if (aa == 0 || bb == 0) return 0;
  return std::acos(std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0));
}

void slerp(const float* u, const float* v, size_t d, double angle, double t, float* out) {
  const double s = std::sin(angle);
  double wu = 1 - t, wv = t;
  if (s > 1e-6) {
    wu = std::sin((1 - t) * angle) / s;
    wv = std::sin(t * angle) / s;
  }
  std::vector<double> x(d);
  double norm = 0;
  for (size_t c = 0; c < d; ++c) {
    x[c] = wu * u[c] + wv * v[c];
    norm += x[c] * x[c];
  }
  norm = std::sqrt(norm);
  if (norm < 1e-12) {
    std::copy_n(u, d, out);
    return;
  }
  // SLERP of unit vectors is a unit vector; dividing by the norm also covers the fallback.
  for (size_t c = 0; c < d; ++c) out[c] = static_cast<float>(x[c] / norm);
}

}  // namespace veloxquant::minicache
