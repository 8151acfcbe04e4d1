// RateQuant's bit allocation (Zuo et al., arXiv 2605.06675): each unit (a KV head, or a layer)
// distorts as D_i(b) = alpha_i * beta^-b at b bits, beta one per quantizer; the allocation that
// minimizes sum_i D_i(b_i) with the mean of b_i held at a target is reverse water-filling (the
// paper's Theorem 2): every unit's distortion is brought down to one water level theta, except
// units already below it at the fewest bits or needing more than the most.
#pragma once

#include <span>
#include <vector>

namespace veloxquant::ratequant {

struct DistortionModel {
  double beta = 0;            // distortion falls by this factor per bit, > 1
  std::vector<double> alpha;  // per unit, > 0
};

// Least-squares fit of ln D_i(b) = ln alpha_i - b ln beta to measured distortions, one slope for
// every unit (the quantizer's) and an intercept per unit. distortion[i][k] is unit i's at
// levels[k]; values at or below 0 count as the smallest positive float. REQUIRES: levels.size()
// >= 2, ascending; every row levels.size() long. Throws Error when beta comes out <= 1 (the
// distortion does not fall with bits, so no allocation can use it).
DistortionModel fit_distortion_model(const std::vector<std::vector<double>>& distortion,
                                     std::span<const int> levels);

// Theorem 2's continuous solution: b_i = clamp(log_beta(alpha_i / theta), lo, hi) with theta set
// so that the mean of b_i is `avg`. Without clamping this is the closed form
// b_i = avg + log_beta(alpha_i / geometric mean of alpha). REQUIRES: lo <= avg <= hi, beta > 1.
std::vector<double> water_fill(std::span<const double> alpha, double beta, double avg, double lo, double hi);

// Integer bit widths from `levels` (ascending, the widths the quantizer accepts) whose sum is at
// most avg * units: each unit starts at the largest level within its continuous water-filling
// width, then the budget left goes, a level step at a time, to the step that lowers the modelled
// distortion most per bit while it fits. Throws SpecError when avg is below the lowest level.
std::vector<int> allocate_bits(std::span<const double> alpha, double beta, double avg, std::span<const int> levels);

}  // namespace veloxquant::ratequant
