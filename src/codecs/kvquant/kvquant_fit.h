// KVQuant's offline calibration of one KV head (kvquant_fit.cpp says what is fitted and which
// sensitivity stands in for the paper's Fisher information).
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant::kvquant {

struct FitConfig {
  unsigned bits = 3;
  size_t outliers = 1;            // sparse entries per value vector, as the codec keeps
  double outlier_fraction = 0.01;  // of each key channel's calibration values, half each side
  bool sink = true;               // sinks are kept exact, so they are left out of the fit
  bool activation_weights = true;  // squared activations as sensitivities; else uniform
};

struct FittedHead {
  std::vector<float> lo, hi;  // per key channel, lo < hi
  std::vector<float> key_levels, value_levels;  // 2^bits ascending in [-1, 1]
};

// Whether calibration token `token` is a sequence's first (its attention sink): the samples are
// consecutive sequences of `sequence` tokens (0: one sequence).
bool is_sink_sample(size_t token, size_t sequence);

// keys, values: `tokens` rows of d floats, `stride` floats apart (one KV head of a
// [tokens, kv_heads, d] array). REQUIRES: tokens >= 1, outliers < d.
FittedHead fit_head(const float* keys, const float* values, size_t tokens, size_t stride, size_t d,
                    size_t sequence, const FitConfig& cfg);

}  // namespace veloxquant::kvquant
