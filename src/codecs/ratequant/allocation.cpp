#include "codecs/ratequant/allocation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "codecs/ratequant/inner.h"
#include "codecs/ratequant/water_filling.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant::ratequant {

namespace {

// The widths the calibration measured (the inner quantizer's accepted widths when it ran): layer 0
// KV head 0's "bits" table, which every head repeats, ascending whole numbers. Read rather than
// recomputed: finding what a quantizer accepts builds its codecs at every width (TurboQuant's
// codebooks), too slow for every cache a model builds.
std::vector<int> measured_levels(const CalibrationArtifact& a, size_t heads) {
  const auto& first = a.layers.at(0).heads.at(0);
  const auto found = first.find("bits");
  const size_t k = found == first.end() ? 0 : found->second.size();
  const std::span<const float> bits = a.layers[0].table(0, "bits", k);  // names the table when missing
  std::vector<int> levels;
  for (float b : bits) {
    if (!(b >= 1 && b <= 64 && b == std::floor(b)) || (!levels.empty() && b <= static_cast<float>(levels.back()))) {
      throw FormatError(fmt::format("ratequant: layer 0 KV head 0 was measured at {} bits after {}; expected "
                                    "ascending whole widths in 1..64", b, levels.empty() ? 0 : levels.back()));
    }
    levels.push_back(static_cast<int>(b));
  }
  for (size_t l = 0; l < a.layers.size(); ++l) {
    for (size_t h = 0; h < heads; ++h) {
      const std::span<const float> own = a.layers[l].table(h, "bits", k);
      for (size_t j = 0; j < k; ++j) {
        if (own[j] != bits[j]) {
          throw FormatError(fmt::format("ratequant: layer {} KV head {} was measured at {} bits where layer 0 "
                                        "KV head 0 was measured at {} (entry {}); expected the same widths for "
                                        "every head", l, h, own[j], bits[j], j));
        }
      }
    }
  }
  return levels;
}

}  // namespace

std::vector<std::vector<int>> explicit_bits(const Params& p, const Spec& inner, const LayerShape& shape) {
  const std::string& text = p.get_text("bits");
  if (text.empty()) return {};
  const auto [lo, hi] = bit_width_range(inner);
  std::vector<int> widths;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('/', at), text.size());
    const std::string entry = text.substr(at, end - at);
    const bool digits = !entry.empty() && entry.size() <= 2 &&
                        std::all_of(entry.begin(), entry.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int b = digits ? std::stoi(entry) : -1;
    if (b < lo || b > hi) {
      throw SpecError(
          fmt::format("ratequant: bits entry {} is '{}'; expected a whole width in {}..{} (what {} "
                      "accepts), entries separated by '/'",
                      widths.size() + 1, entry, lo, hi, inner.method->name));
    }
    widths.push_back(b);
    at = end + 1;
  }
  const size_t layers = static_cast<size_t>(std::max(shape.layers, 1)), heads = shape.kv_heads;
  if (widths.size() != layers && widths.size() != layers * heads) {
    const std::string per_head = heads > 1
                                     ? fmt::format(" or {} (one per KV head, layer by layer)", layers * heads)
                                     : std::string();
    throw SpecError(
        fmt::format("ratequant: bits= names {} widths for {} layers of {} KV heads; expected {} (one "
                    "per layer){}",
                    widths.size(), layers, heads, layers, per_head));
  }
  std::vector<std::vector<int>> out(layers, std::vector<int>(heads));
  for (size_t l = 0; l < layers; ++l)
    for (size_t h = 0; h < heads; ++h)
      out[l][h] = widths.size() == layers ? widths[l] : widths[l * heads + h];
  return out;
}

std::vector<std::vector<int>> model_bits(const Params& p, const Spec& inner, const LayerShape& shape) {
  std::vector<std::vector<int>> bits = explicit_bits(p, inner, shape);
  return bits.empty() ? allocate_model(p, shape) : bits;
}

std::vector<std::vector<int>> allocate_model(const Params& p, const LayerShape& shape) {
  layer_calibration("ratequant", p, shape);  // the artifact is ratequant's, for this spec and shape
  const CalibrationArtifact& a = *shape.calibration;
  const size_t layers = a.layers.size(), heads = shape.kv_heads;
  const std::vector<int> levels = measured_levels(a, heads);
  const size_t k = levels.size();
  std::vector<std::vector<double>> distortion;  // one row per (layer, head), layer-major
  for (size_t l = 0; l < layers; ++l) {
    for (size_t h = 0; h < heads; ++h) {
      const std::span<const float> d = a.layers[l].table(h, "distortion", k);
      for (size_t j = 0; j < k; ++j) {
        if (!(std::isfinite(d[j]) && d[j] >= 0)) {
          throw FormatError(fmt::format("ratequant: distortion of layer {} KV head {} at {} bits is {}; "
                                        "expected a finite value >= 0", l, h, levels[j], d[j]));
        }
      }
      distortion.emplace_back(d.begin(), d.end());
    }
  }
  const double avg = p.get_float("avg");
  std::vector<std::vector<int>> out(layers, std::vector<int>(heads, levels.front()));
  if (k == 1) {  // nothing to allocate; allocate_bits's check of avg still applies
    allocate_bits(std::vector<double>(layers * heads, 1.0), 2.0, avg, levels);
    return out;
  }
  const DistortionModel m = fit_distortion_model(distortion, levels);
  const bool per_layer = p.get_choice("per") == "layer";
  std::vector<double> alpha = m.alpha;
  if (per_layer) {
    alpha.assign(layers, 0.0);
    for (size_t i = 0; i < m.alpha.size(); ++i) alpha[i / heads] += m.alpha[i];
  }
  const std::vector<int> bits = allocate_bits(alpha, m.beta, avg, levels);
  for (size_t l = 0; l < layers; ++l)
    for (size_t h = 0; h < heads; ++h) out[l][h] = bits[per_layer ? l : l * heads + h];
  return out;
}

}  // namespace veloxquant::ratequant
