#include "codecs/spectral/bit_allocation.h"

#include <algorithm>
#include <cmath>

namespace veloxquant::spectral {

std::vector<unsigned> water_fill_bits(std::span<const double> variances, size_t total) {
  std::vector<unsigned> bits(variances.size(), 0);
  std::vector<double> distortion(variances.begin(), variances.end());
  for (size_t given = 0; given < total; ++given) {
    size_t best = variances.size();
    for (size_t j = 0; j < variances.size(); ++j) {
      if (bits[j] < kMaxDirectionBits && (best == variances.size() || distortion[j] > distortion[best])) best = j;
    }
    if (best == variances.size()) break;  // every direction is full: REQUIRES says not to ask
    ++bits[best];
    distortion[best] /= 4;
  }
  return bits;
}

size_t participation_signal_count(std::span<const double> eigenvalues) {
  double sum = 0, sum_sq = 0;
  for (double l : eigenvalues) {
    sum += std::max(l, 0.0);
    sum_sq += std::max(l, 0.0) * std::max(l, 0.0);
  }
  if (!(sum_sq > 0)) return 1;
  // A hair below the ratio before rounding up, so k exactly equal eigenvalues give k, not k + 1.
  const auto ratio = static_cast<size_t>(std::ceil(sum * sum / sum_sq * (1 - 1e-12)));
  return std::clamp<size_t>(ratio, 1, eigenvalues.size());
}

}  // namespace veloxquant::spectral
