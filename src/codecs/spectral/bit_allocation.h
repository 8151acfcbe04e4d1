// How SpectralQuant spends a key's bits across its eigen-directions, and which directions count
// as signal.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace veloxquant::spectral {

// The most bits one direction gets: its codebook then has 256 levels, one byte per code.
inline constexpr unsigned kMaxDirectionBits = 8;

// Integer reverse water-filling: `total` bits spread over directions of variances `variances`
// (any order, >= 0) so as to minimize sum_j variances[j] 4^-bits[j], the high-resolution
// distortion of a scalar quantizer of bits[j] bits on direction j. Bits are handed out one at a
// time to the direction whose distortion the bit lowers most (the largest variances[j] 4^-bits[j],
// the lower index on a tie), never past kMaxDirectionBits; as the objective is separable and
// convex in each bits[j], this greedy choice is optimal over integers, and it lands on the
// closed-form solution bits[j] = max(0, log2(variances[j] / theta) / 2) whenever that one is
// integral. The result sums to `total`. REQUIRES: total <= kMaxDirectionBits * variances.size().
std::vector<unsigned> water_fill_bits(std::span<const double> variances, size_t total);

// The automatic signal dimension d_s: the participation ratio of the spectrum,
// (sum lambda)^2 / sum lambda^2, rounded up and kept within [1, size] (1 for an all-zero
// spectrum). It counts the directions that carry the variance: k equal eigenvalues and the rest
// zero give k.
size_t participation_signal_count(std::span<const double> eigenvalues);

}  // namespace veloxquant::spectral
