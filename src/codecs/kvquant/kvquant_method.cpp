#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/kvquant/kvquant_codec.h"
#include "codecs/kvquant/kvquant_fit.h"
#include "codecs/kvquant/method.h"
#include "cuda/kvquant/kvquant_rules.h"
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

struct LayerTables {
  std::vector<kvquant::HeadTables> keys, values;  // one per KV head
};

// Every KV head's tables of the layer, from the shape's calibration artifact, checked.
LayerTables layer_tables(const Params& p, const LayerShape& s, unsigned bits) {
  const LayerCalibration& cal = layer_calibration(kName, p, s);
  const size_t levels = size_t{1} << bits, d = s.head_dim;
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
  return {std::move(keys), std::move(values)};
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  const kvquant::FitConfig cfg = fit_config(p, s.head_dim);
  LayerTables t = layer_tables(p, s, cfg.bits);
  const kvquant::KvquantConfig codec{cfg.bits, cfg.outliers, cfg.sink};
  LayerCodecs c;
  c.key = std::make_unique<kvquant::KvquantCodec>(s.head_dim, kvquant::Axis::PerChannel, codec,
                                                  std::move(t.keys));
  c.value = std::make_unique<kvquant::KvquantCodec>(s.head_dim, kvquant::Axis::PerToken, codec,
                                                    std::move(t.values));
  return c;
}

// The GPU form (cuda/kvquant/): the same records and tables. Without the artifact at hand (a
// question about the shape alone, as `veloxquant methods` asks) only the settings are checked, and
// a cache built so is refused, as on the CPU, for want of its calibration.
std::string cuda_config(const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
  const kvquant::FitConfig cfg = fit_config(p, s.head_dim);
  c.format = kName;
  c.bits = cfg.bits;
  if (std::string problem = cuda::kvquant_shape_problem(c, cfg.outliers, cfg.sink); !problem.empty())
    return problem;
  if (!s.calibration) return {};
  const LayerTables t = layer_tables(p, s, cfg.bits);
  auto d = std::make_shared<cuda::KvquantTables>();
  d->outliers = cfg.outliers, d->sink = cfg.sink;
  for (size_t h = 0; h < s.kv_heads; ++h) {
    d->key_levels.insert(d->key_levels.end(), t.keys[h].levels.begin(), t.keys[h].levels.end());
    d->key_lo.insert(d->key_lo.end(), t.keys[h].lo.begin(), t.keys[h].lo.end());
    d->key_hi.insert(d->key_hi.end(), t.keys[h].hi.begin(), t.keys[h].hi.end());
    d->value_levels.insert(d->value_levels.end(), t.values[h].levels.begin(), t.values[h].levels.end());
  }
  c.tables = std::move(d);
  return cuda::kvquant_problem(c);
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
  m.cuda_config = cuda_config;
  m.cuda_attention = "on fp16 rows decoded from the codes tile by tile in shared memory";
  // The paper quantizes keys before RoPE: a channel pair keeps one distribution there, while after
  // RoPE it turns with the position, past what a calibration context has seen.
  m.keys_before_rope = true;
  return m;
}

}  // namespace veloxquant
