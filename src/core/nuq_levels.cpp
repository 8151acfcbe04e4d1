#include "core/nuq_levels.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace veloxquant {

std::vector<float> weighted_kmeans_1d(std::span<const float> u, std::span<const float> w, size_t levels) {
  const size_t n = u.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return u[a] < u[b]; });
  // Prefix sums of w and w*u over the sorted samples: each Lloyd step is then a binary search per
  // level instead of a pass over every sample.
  std::vector<float> x(n);
  std::vector<double> cw(n + 1, 0.0), cwu(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    x[i] = u[order[i]];
    cw[i + 1] = cw[i] + w[order[i]];
    cwu[i + 1] = cwu[i] + static_cast<double>(w[order[i]]) * x[i];
  }
  const double total = cw[n];
  std::vector<double> c(levels);
  for (size_t j = 0; j < levels; ++j) {  // weighted quantiles (j + 1/2) / levels
    const double target = total * (static_cast<double>(j) + 0.5) / static_cast<double>(levels);
    const size_t at = static_cast<size_t>(std::lower_bound(cw.begin() + 1, cw.end(), target) - cw.begin()) - 1;
    c[j] = x[std::min(at, n - 1)];
  }
  for (int iter = 0; iter < 200; ++iter) {
    double moved = 0;
    size_t begin = 0;
    for (size_t j = 0; j < levels; ++j) {
      size_t end = n;
      if (j + 1 < levels) {
        const float edge = static_cast<float>((c[j] + c[j + 1]) / 2);
        end = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), edge) - x.begin());
        end = std::max(end, begin);
      }
      const double mass = cw[end] - cw[begin];
      if (mass > 0) {
        const double next = (cwu[end] - cwu[begin]) / mass;
        moved = std::max(moved, std::fabs(next - c[j]));
        c[j] = next;
      }
      begin = end;
    }
    if (moved < 1e-7) break;
  }
  std::sort(c.begin(), c.end());
  return {c.begin(), c.end()};
}

uint8_t nearest_level(std::span<const float> levels, float x) {
  // Levels are few (at most 256): the first whose upper midpoint is at or above x.
  size_t j = 0;
  while (j + 1 < levels.size() && x > (levels[j] + levels[j + 1]) * 0.5f) ++j;
  return static_cast<uint8_t>(j);
}

}  // namespace veloxquant
