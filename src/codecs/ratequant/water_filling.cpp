#include "codecs/ratequant/water_filling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "veloxquant/error.h"

namespace veloxquant::ratequant {

DistortionModel fit_distortion_model(const std::vector<std::vector<double>>& distortion,
                                     std::span<const int> levels) {
  const size_t k = levels.size();
  double mean_b = 0;
  for (int b : levels) mean_b += b;
  mean_b /= static_cast<double>(k);
  // ln D at every unit and level, and the common slope over every unit's centred points.
  std::vector<std::vector<double>> y(distortion.size(), std::vector<double>(k));
  double num = 0, den = 0;
  for (size_t i = 0; i < distortion.size(); ++i) {
    double mean_y = 0;
    for (size_t j = 0; j < k; ++j) {
      y[i][j] = std::log(std::max(distortion[i][j], static_cast<double>(std::numeric_limits<float>::min())));
      mean_y += y[i][j];
    }
    mean_y /= static_cast<double>(k);
    for (size_t j = 0; j < k; ++j) {
      num += (levels[j] - mean_b) * (y[i][j] - mean_y);
      den += (levels[j] - mean_b) * (levels[j] - mean_b);
    }
  }
  DistortionModel m;
  const double log_beta = -num / den;
  m.beta = std::exp(log_beta);
  if (!(log_beta > 1e-9)) {
    throw Error(fmt::format("ratequant: the measured distortion does not fall with bits (fitted beta = {}); "
                            "expected beta > 1", m.beta));
  }
  for (const auto& row : y) {
    double ln_alpha = 0;
    for (size_t j = 0; j < k; ++j) ln_alpha += row[j] + levels[j] * log_beta;
    m.alpha.push_back(std::exp(ln_alpha / static_cast<double>(k)));
  }
  return m;
}

std::vector<double> water_fill(std::span<const double> alpha, double beta, double avg, double lo, double hi) {
  const double log_beta = std::log(beta);
  const auto widths = [&](double ln_theta) {
    std::vector<double> b(alpha.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::clamp((std::log(alpha[i]) - ln_theta) / log_beta, lo, hi);
    return b;
  };
  const auto mean = [](const std::vector<double>& b) {
    double s = 0;
    for (double x : b) s += x;
    return s / static_cast<double>(b.size());
  };
  // The mean width falls as the water level rises: bisect ln(theta) between a level that gives
  // every unit hi bits and one that gives every unit lo.
  const auto [min_a, max_a] = std::minmax_element(alpha.begin(), alpha.end());
  double below = std::log(*min_a) - hi * log_beta - 1, above = std::log(*max_a) - lo * log_beta + 1;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (below + above);
    (mean(widths(mid)) > avg ? below : above) = mid;
  }
  return widths(0.5 * (below + above));
}

std::vector<int> allocate_bits(std::span<const double> alpha, double beta, double avg, std::span<const int> levels) {
  const size_t n = alpha.size(), k = levels.size();
  if (avg < levels.front()) {
    throw SpecError(fmt::format("ratequant: avg={} is below the fewest bits the quantizer accepts ({}); "
                                "expected avg >= {}", avg, levels.front(), levels.front()));
  }
  // Integer widths: the budget is the whole bits within avg * units.
  const auto budget = static_cast<long>(std::floor(avg * static_cast<double>(n) + 1e-9));
  const std::vector<double> target = water_fill(alpha, beta, std::min<double>(avg, levels.back()), levels.front(),
                                                levels.back());
  std::vector<size_t> at(n, 0);
  long spent = 0;
  for (size_t i = 0; i < n; ++i) {
    while (at[i] + 1 < k && levels[at[i] + 1] <= target[i] + 1e-9) ++at[i];
    spent += levels[at[i]];
  }
  for (;;) {
    size_t best = n;
    double best_gain = 0;
    for (size_t i = 0; i < n; ++i) {
      if (at[i] + 1 == k) continue;
      const int lo = levels[at[i]], hi = levels[at[i] + 1];
      if (hi - lo > budget - spent) continue;
      const double gain = alpha[i] * (std::pow(beta, -lo) - std::pow(beta, -hi)) / (hi - lo);
      if (best == n || gain > best_gain) best = i, best_gain = gain;
    }
    if (best == n) break;
    spent += levels[at[best] + 1] - levels[at[best]];
    ++at[best];
  }
  std::vector<int> bits(n);
  for (size_t i = 0; i < n; ++i) bits[i] = levels[at[i]];
  return bits;
}

}  // namespace veloxquant::ratequant
