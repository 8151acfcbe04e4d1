#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/kvquant/kvquant_codec.h"
#include "codecs/kvquant/kvquant_fit.h"
#include "codecs/kvquant/method.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr const char* kName = "kvquant_nuq";
// The key tables describe keys before RoPE (MethodInfo::keys_before_rope): the calibrate pass
// hands fit() unrotated keys. Artifacts of the earlier version, fitted to rotated keys, named them
// key.lo, key.hi and key.levels, and are refused by name.
constexpr const char* kKeyLo = "unrotated_key.lo";
constexpr const char* kKeyHi = "unrotated_key.hi";
constexpr const char* kKeyLevels = "unrotated_key.levels";

// Sparse entries per vector of d elements: the outlier fraction, rounded, below d.
size_t outliers_of(const Params& p, size_t d) {
  const double f = p.get_float("outliers");
  const auto k = static_cast<size_t>(std::llround(f * static_cast<double>(d)));
  if (k >= d) {
    throw SpecError(fmt::format("{}: outliers={} keeps {} of head_dim {} elements; expected fewer",
                                kName, f, k, d));
  }
  return k;
}

kvquant::FitConfig fit_config(const Params& p, size_t d) {
  return {static_cast<unsigned>(p.get_int("bits")), outliers_of(p, d), p.get_float("outliers"),
          p.get_bool("sink"), p.get_choice("weight") == "activation"};
}

// A table read back from an artifact, checked the way fit() makes it.
std::vector<float> levels_from(const LayerCalibration& cal, size_t head, const char* name, size_t levels) {
  const std::span<const float> t = cal.table(head, name, levels);
  for (size_t i = 0; i < t.size(); ++i) {
    if (std::fabs(t[i]) > 1 || (i > 0 && t[i] < t[i - 1])) {
      throw FormatError(fmt::format("{}: calibration table '{}' of KV head {} is not ascending within "
                                    "[-1, 1] at index {}", kName, name, head, i));
    }
  }
  return {t.begin(), t.end()};
}

LayerCalibration fit(const Params& p, const CalibrationSamples& s) {
  const kvquant::FitConfig cfg = fit_config(p, s.head_dim);
  LayerCalibration out;
  out.heads.resize(s.kv_heads);
  const size_t stride = s.kv_heads * s.head_dim;
  for (size_t h = 0; h < s.kv_heads; ++h) {
    kvquant::FittedHead f = kvquant::fit_head(s.keys.data() + h * s.head_dim, s.values.data() + h * s.head_dim,
                                              s.tokens, stride, s.head_dim, s.sequence, cfg);
    out.heads[h][kKeyLo] = std::move(f.lo);
    out.heads[h][kKeyHi] = std::move(f.hi);
    out.heads[h][kKeyLevels] = std::move(f.key_levels);
    out.heads[h]["value.levels"] = std::move(f.value_levels);
  }
  return out;
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  const kvquant::FitConfig cfg = fit_config(p, s.head_dim);
  const LayerCalibration& cal = layer_calibration(kName, p, s);
  const size_t levels = size_t{1} << cfg.bits, d = s.head_dim;
  std::vector<kvquant::HeadTables> keys(s.kv_heads), values(s.kv_heads);
  for (size_t h = 0; h < s.kv_heads; ++h) {
    if (h < cal.heads.size() && cal.heads[h].contains("key.lo") && !cal.heads[h].contains(kKeyLo)) {
      throw FormatError(
          fmt::format("{}: the calibration artifact in '{}' was fitted to keys after RoPE (an earlier "
                      "version); the method now quantizes keys before RoPE, as the paper does: "
                      "calibrate again",
                      kName, p.get_text("artifacts")));
    }
    keys[h].levels = levels_from(cal, h, kKeyLevels, levels);
    const std::span<const float> lo = cal.table(h, kKeyLo, d), hi = cal.table(h, kKeyHi, d);
    for (size_t c = 0; c < d; ++c) {
      if (!(lo[c] < hi[c])) {
        throw FormatError(fmt::format("{}: calibrated range of key channel {} of KV head {} is [{}, {}]; "
                                      "expected lo < hi", kName, c, h, lo[c], hi[c]));
      }
    }
    keys[h].lo.assign(lo.begin(), lo.end());
    keys[h].hi.assign(hi.begin(), hi.end());
    values[h].levels = levels_from(cal, h, "value.levels", levels);
  }
  const kvquant::KvquantConfig codec{cfg.bits, cfg.outliers, cfg.sink};
  LayerCodecs c;
  c.key = std::make_unique<kvquant::KvquantCodec>(d, kvquant::Axis::PerChannel, codec, std::move(keys));
  c.value = std::make_unique<kvquant::KvquantCodec>(d, kvquant::Axis::PerToken, codec, std::move(values));
  return c;
}

}  // namespace

MethodInfo kvquant_nuq_method() {
  MethodInfo m;
  m.name = kName;
  m.family = "kvquant";
  m.paper = "Hooper et al., KVQuant, NeurIPS 2024, arXiv 2401.18079";
  m.summary = "keys per channel, values per token, non-uniform levels from sensitivity-weighted "
              "k-means on calibration data, ~1% outliers and the first token exact (calibrated)";
  m.params = {
      ParamDef::integer("bits", 3, 2, 8, "bits per element of the dense part (2^bits NUQ levels)"),
      ParamDef::real("outliers", 0.01, 0, 0.5,
                     "fraction of each vector kept exact in the sparse part (rounded per vector)"),
      ParamDef::boolean("sink", true, "keep each stream's first token (the attention sink) exact"),
      ParamDef::choice("weight", {"activation", "uniform"}, "activation",
                       "k-means sensitivity: squared activations (the Fisher proxy) or none"),
      artifacts_param(true),
  };
  m.make = make;
  m.fit = fit;
  // The paper quantizes keys before RoPE: a channel pair keeps one distribution there, while after
  // RoPE it turns with the position, past what a calibration context has seen.
  m.keys_before_rope = true;
  return m;
}

}  // namespace veloxquant
