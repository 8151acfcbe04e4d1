// Seeded test data shared by the test files.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace veloxquant::test {

// n independent N(0, sigma^2) floats; the same seed gives the same data on every platform.
inline std::vector<float> gaussian(size_t n, uint64_t seed, double sigma = 1.0) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(sigma * rng.normal());
  return x;
}

// a . b over n floats, summed in double.
inline double dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// ||got - want|| / ||want||, summed in double.
inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    num += e * e;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace veloxquant::test
