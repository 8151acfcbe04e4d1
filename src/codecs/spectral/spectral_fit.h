// SpectralQuant's offline calibration of one KV head's keys (spectral_fit.cpp says what is
// fitted), and the allocation both the fit and the method derive from the eigenvalues.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace veloxquant::spectral {

// Where each eigen-direction's bits and levels come from: directions [0, signal) have levels of
// their own, the rest (the noise) share one normalized codebook per width, each direction
// scaled by its own centre and standard deviation.
struct Allocation {
  std::vector<unsigned> bits;          // per direction, reverse water-filling on the eigenvalues
  size_t signal = 0;                   // d_s
  std::vector<unsigned> noise_widths;  // the distinct widths of the noise directions, ascending
  size_t signal_levels() const;        // sum over signal directions of 2^bits
  size_t noise_levels() const;         // sum over noise_widths of 2^width
};

// What a spec chooses: the average bits, d_s, and whether the bits are water-filled.
struct AllocationRule {
  unsigned bits = 3;
  size_t signal = 0;       // d_s, or 0 for the participation ratio (participation_signal_count)
  bool water_fill = true;  // false: `bits` for every direction (alloc=uniform, the ablation)
};

// eigenvalues: descending, >= 0. REQUIRES: 1 <= rule.bits <= 8, rule.signal <= eigenvalues.size().
Allocation allocate(std::span<const float> eigenvalues, const AllocationRule& rule);

// One KV head's calibrated tables, as the artifact stores them.
struct FittedHead {
  std::vector<float> rotation;       // [d][d], row j = eigenvector j, largest eigenvalue first
  std::vector<float> eigenvalues;    // d, descending: the unit keys' variance along each row
  std::vector<float> signal_levels;  // each signal direction's 2^bits ascending levels, in order
  std::vector<float> noise_center, noise_scale;  // per noise direction: mean, standard deviation
  std::vector<float> noise_levels;   // per noise width, ascending: 2^width normalized levels
};

// keys: `tokens` rows of d floats, `stride` floats apart (one KV head of a [tokens, kv_heads, d]
// array). REQUIRES: d >= 1, 1 <= rule.bits <= 8, rule.signal <= d.
FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t d, const AllocationRule& rule);

}  // namespace veloxquant::spectral
