#include "core/rng.h"

#include <cmath>
#include <numbers>

#include "core/precomputed.h"

namespace veloxquant {
namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> labels) {
  uint64_t x = seed;
  uint64_t h = splitmix64(x);
  for (uint64_t l : labels) {
    x = h ^ (l + 0x632be59bd9b4e019ull);
    h = splitmix64(x);
  }
  return h;
}

std::vector<float> gaussian_matrix(size_t rows, size_t cols, uint64_t seed) {
  return floats_of(precomputed_table({TableKind::GaussianMatrix, cols, rows, seed}, [&] {
    std::vector<float> m(rows * cols);
    Rng rng(seed);
    for (float& x : m) x = static_cast<float>(rng.normal());
    return table_of(m);
  }));
}

}  // namespace veloxquant
