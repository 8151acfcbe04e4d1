// KVQuant's offline calibration of one layer: per KV head, each key channel's outlier thresholds
// (the range its dense values are normalized by) and the NUQ levels of keys and of values, by
// sensitivity-weighted k-means over the normalized calibration activations.
//
// Sensitivity: the paper weights each activation by its Fisher information (squared gradient of
// the loss), which needs a backward pass this runtime does not have. The proxy here is the
// squared activation itself (weight=activation): like the Fisher weights in the paper, it pulls
// levels toward the large-magnitude entries that dominate q.k and the attention output, at the
// cost of coarser levels near zero; weight=uniform is plain k-means.
#include "codecs/kvquant/kvquant_fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/nuq_levels.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kvquant {
namespace {

// The q-quantile of v (nearest rank), which it reorders.
float quantile(std::vector<float>& v, double q) {
  const auto at = static_cast<size_t>(std::llround(q * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
  return v[at];
}

float weight_of(float x, bool activation) { return activation ? x * x + 1e-12f : 1.0f; }

}  // namespace

bool is_sink_sample(size_t token, size_t sequence) {
  return sequence ? token % sequence == 0 : token == 0;
}

FittedHead fit_head(const float* keys, const float* values, size_t tokens, size_t stride, size_t d,
                    size_t sequence, const FitConfig& cfg) {
  std::vector<size_t> rows;  // the tokens fitted to: sinks are kept exact, not quantized
  for (size_t t = 0; t < tokens; ++t)
    if (!(cfg.sink && is_sink_sample(t, sequence))) rows.push_back(t);
  if (rows.empty()) {  // a text of sinks alone: fit to them rather than to nothing
    rows.resize(tokens);
    std::iota(rows.begin(), rows.end(), size_t{0});
  }
  const size_t levels = size_t{1} << cfg.bits;
  const double tail = cfg.outlier_fraction / 2;
  FittedHead f;
  f.lo.resize(d);
  f.hi.resize(d);
  std::vector<float> column(rows.size()), u, w;
  // Keys: each channel's thresholds at the outlier fraction's lower and upper quantiles; what lies
  // within is normalized to [-1, 1] and pooled over the channels.
  for (size_t c = 0; c < d; ++c) {
    for (size_t i = 0; i < rows.size(); ++i) column[i] = keys[rows[i] * stride + c];
    float lo = quantile(column, tail), hi = quantile(column, 1 - tail);
    const float floor = 1e-6f * std::max(1.0f, std::max(std::fabs(lo), std::fabs(hi)));
    if (hi - lo < floor) {  // a constant channel: any positive width reproduces it
      lo -= floor;
      hi += floor;
    }
    f.lo[c] = lo;
    f.hi[c] = hi;
  }
  for (size_t r : rows) {
    for (size_t c = 0; c < d; ++c) {
      const float x = keys[r * stride + c], mid = (f.lo[c] + f.hi[c]) / 2, half = (f.hi[c] - f.lo[c]) / 2;
      const float v = (x - mid) / half;
      if (std::fabs(v) > 1) continue;  // an outlier: stored exactly, not by a level
      u.push_back(v);
      w.push_back(weight_of(x, cfg.activation_weights));
    }
  }
  f.key_levels = weighted_kmeans_1d(u, w, levels);
  // Values: per token, its `outliers` largest magnitudes set aside (as encode does), the rest
  // normalized by the token's own range.
  u.clear();
  w.clear();
  std::vector<uint32_t> order(d);
  for (size_t r : rows) {
    const float* x = values + r * stride;
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(cfg.outliers), order.end(),
                      [&](uint32_t a, uint32_t b) {
                        return std::fabs(x[a]) > std::fabs(x[b]) || (std::fabs(x[a]) == std::fabs(x[b]) && a < b);
                      });
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = cfg.outliers; i < d; ++i) {
      lo = std::min(lo, x[order[i]]);
      hi = std::max(hi, x[order[i]]);
    }
    lo = f16_to_f32(f32_to_f16(lo));
    hi = f16_to_f32(f32_to_f16(hi));
    const float mid = (lo + hi) / 2, half = (hi - lo) / 2;
    if (!(half > 0)) continue;  // a flat token: every level reproduces it
    for (size_t i = cfg.outliers; i < d; ++i) {
      const float xv = x[order[i]];
      u.push_back(std::clamp((xv - mid) / half, -1.0f, 1.0f));
      w.push_back(weight_of(xv, cfg.activation_weights));
    }
  }
  if (u.empty()) {  // every calibration token was flat: a uniform grid serves as well as any
    u = {-1.0f, 1.0f};
    w = {1.0f, 1.0f};
  }
  f.value_levels = weighted_kmeans_1d(u, w, levels);
  return f;
}

}  // namespace veloxquant::kvquant
