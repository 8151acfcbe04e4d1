#include "codecs/polar/angle_codebooks.h"

#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <utility>

namespace veloxquant::polar {

double angle_density(size_t level, double psi) {
  if (level == 1) return 1.0;
  const double k = std::ldexp(1.0, static_cast<int>(level) - 1) - 1;  // 2^(level-1) - 1
  return std::pow(std::sin(2 * psi), k);
}

double angle_range_hi(size_t level) { return level == 1 ? 2 * std::numbers::pi : std::numbers::pi / 2; }

const ScalarCodebook& angle_codebook(size_t level, unsigned bits) {
  static std::mutex mu;
  static std::map<std::pair<size_t, unsigned>, ScalarCodebook> solved;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = solved.find({level, bits});
  if (it == solved.end()) {
    ScalarCodebook cb = lloyd_max([level](double psi) { return angle_density(level, psi); }, 0.0,
                                  angle_range_hi(level), size_t{1} << bits);
    it = solved.emplace(std::make_pair(level, bits), std::move(cb)).first;
  }
  return it->second;  // std::map never moves its elements
}

}  // namespace veloxquant::polar
