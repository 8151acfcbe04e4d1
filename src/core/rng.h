// Deterministic random numbers: xoshiro256** seeded through splitmix64. Same seed, same stream,
// on every platform (no std:: distributions, whose output is implementation-defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace veloxquant {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Standard normal (Box-Muller; the second value is kept for the next call).
  double normal();
  // +1.0 or -1.0 with equal probability.
  float sign() { return (next_u64() >> 63) ? -1.0f : 1.0f; }

 private:
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

// Mixes a base seed with labels (layer index, stream tag) into an independent seed.
uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> labels);

// rows x cols standard normals from `seed`, row-major, drawn row by row: the Gaussian sketches
// of qjl and turboquant_prod.
std::vector<float> gaussian_matrix(size_t rows, size_t cols, uint64_t seed);

}  // namespace veloxquant
