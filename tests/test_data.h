// Seeded test data shared by the test files.
#pragma once

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

}  // namespace veloxquant::test
