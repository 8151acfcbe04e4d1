#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/ratequant/allocation.h"
#include "codecs/ratequant/inner.h"
#include "codecs/ratequant/method.h"
#include "codecs/ratequant/sensitivity.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr const char* kName = "ratequant";
// Tokens per measured sequence when the samples are one long run (calibrate_on_samples): the
// measurement is quadratic in it.
constexpr size_t kSequenceTokens = 512;

// Per KV head: the attention-output distortion at every bit width the inner quantizer accepts
// ("distortion"), and those widths ("bits"), which make() allocates among without building the
// quantizer at every width again.
LayerCalibration fit(const Params& p, const CalibrationSamples& s) {
  if (!p.get_text("bits").empty()) {
    throw SpecError(fmt::format("{}: bits={} names the widths, which need no calibration; calibrate without "
                                "bits= to have them allocated",
                                kName, p.get_text("bits")));
  }
  const Spec inner = parse_spec(p.get_text("inner"));
  const LayerShape shape{1, s.head_dim, 0, 0};
  const std::vector<int> levels = ratequant::accepted_bits(inner, shape);
  std::vector<LayerCodecs> codecs;
  for (int b : levels) codecs.push_back(ratequant::make_at_bits(inner, b, shape));
  const size_t length = s.sequence ? s.sequence : std::min(s.tokens, kSequenceTokens);
  const size_t sequences = std::min(s.tokens / length, static_cast<size_t>(p.get_int("sequences")));
  LayerCalibration out;
  out.heads.resize(s.kv_heads);
  const size_t stride = s.kv_heads * s.head_dim;
  for (size_t h = 0; h < s.kv_heads; ++h) {
    const ratequant::HeadSamples head{s.keys.data() + h * s.head_dim, s.values.data() + h * s.head_dim,
                                      sequences, length, s.head_dim, stride};
    const std::vector<double> d = ratequant::attention_distortion(codecs, head);
    out.heads[h]["distortion"].assign(d.begin(), d.end());
    out.heads[h]["bits"].assign(levels.begin(), levels.end());
  }
  return out;
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  const Spec inner = parse_spec(p.get_text("inner"));
  const std::vector<int> bits = ratequant::model_bits(p, inner, s).at(static_cast<size_t>(s.layer));
  std::map<int, LayerCodecs> at;  // one set of codecs per width this layer uses
  for (int b : bits)
    if (!at.contains(b)) at.emplace(b, ratequant::make_at_bits(inner, b, s));
  LayerCodecs c = ratequant::make_at_bits(inner, bits[0], s);
  std::map<int, std::shared_ptr<const Codec>> keys, values;
  for (auto& [b, codecs] : at) {
    // One cache layer holds every head: the widths may change the codes, not the layout.
    if (codecs.residual != c.residual || codecs.key->block_tokens() != c.key->block_tokens() ||
        codecs.value->block_tokens() != c.value->block_tokens() ||
        codecs.key->variable_length() != c.key->variable_length() ||
        codecs.value->variable_length() != c.value->variable_length()) {
      throw SpecError(fmt::format("{}: {} at {} and {} bits differs in its residual window, block or "
                                  "length kind; expected one layout at every width", kName,
                                  inner.method->name, bits[0], b));
    }
    keys[b] = std::move(codecs.key);
    values[b] = std::move(codecs.value);
  }
  for (int b : bits) {
    c.head_keys.push_back(keys[b]);
    c.head_values.push_back(values[b]);
  }
  return c;
}

// The GPU form: the inner quantizer's, at this layer's width. A GPU cache layer codes every KV
// head with one width, so a layer whose heads were given different ones is refused (per=layer, or
// bits= with a width per layer, gives one). Without bits= or a calibration (a question about the
// shape alone, as `veloxquant methods` asks) the inner quantizer's form answers at its own widths,
// unless per=head may give a layer's heads different ones.
std::string cuda_config(const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
  const Spec inner = parse_spec(p.get_text("inner"));
  if (!inner.method->cuda_config) {
    return fmt::format("{} wraps {}, which runs on the CPU cache only", kName, inner.method->name);
  }
  if (p.get_text("bits").empty() && !s.calibration) {
    if (p.get_choice("per") == "head" && s.kv_heads > 1) {
      return fmt::format("{} per=head gives each of a layer's {} KV heads a width of its own; a GPU cache "
                         "layer codes its heads with one (per=layer, or bits= with one width per layer)",
                         kName, s.kv_heads);
    }
    return inner.method->cuda_config(inner.params, s, c);
  }
  const std::vector<int> layer = ratequant::model_bits(p, inner, s).at(static_cast<size_t>(s.layer));
  if (std::adjacent_find(layer.begin(), layer.end(), std::not_equal_to<>()) != layer.end()) {
    std::string widths;
    for (int b : layer) {
      if (!widths.empty()) widths += '/';
      widths += std::to_string(b);
    }
    return fmt::format("{} gives layer {}'s KV heads the widths {}; a GPU cache layer codes its heads "
                       "with one (per=layer, or bits= with one width per layer)",
                       kName, s.layer, widths);
  }
  return inner.method->cuda_config(ratequant::params_at_bits(inner, layer.front()), s, c);
}

// "bits per layer: 2 4 2 ... (mean 2.5)", a layer's KV heads joined by '/'.
std::string describe(const Params& p, const LayerShape& s) {
  std::string text;
  double sum = 0, units = 0;
  for (const std::vector<int>& layer : ratequant::allocate_model(p, s)) {
    text += ' ';
    for (size_t h = 0; h < layer.size(); ++h) {
      if (h) text += '/';
      text += std::to_string(layer[h]);
      sum += layer[h];
      ++units;
    }
  }
  return fmt::format("bits per layer:{} (mean {:.4g})", text, sum / units);
}

}  // namespace

MethodInfo ratequant_method() {
  MethodInfo m;
  m.name = kName;
  m.family = "ratequant";
  m.paper = "Zuo, Zhou, Cong, Xi, Leung, RateQuant: Optimal Mixed-Precision KV Cache Quantization via "
            "Rate-Distortion Theory, arXiv 2605.06675";
  m.summary = "bit width per KV head (or layer) for any quantizer with a bits parameter: distortion "
              "D(b) = alpha beta^-b fitted to attention errors measured at calibration, reverse "
              "water-filling with the average held (calibrated; 'ratequant:avg=2.5+kivi')";
  m.params = {
      ParamDef::real("avg", 2.5, 1, 8, "average bit width over every KV head of the model (never exceeded)"),
      ParamDef::choice("per", {"head", "layer"}, "head", "allocation unit: each KV head, or each layer"),
      ParamDef::integer("sequences", 8, 1, 256,
                        "calibration sequences the distortion is measured on, per layer"),
      ParamDef::text("bits",
                     "widths instead of the calibrated allocation, '/' between them: one per layer, or "
                     "one per KV head layer by layer (no calibration needed; avg, per and sequences unused)"),
      artifacts_param(true),
  };
  m.make = make;
  m.fit = fit;
  m.describe_calibration = describe;
  m.check_inner = ratequant::check_inner;
  m.default_inner = "kivi";
  m.cuda_config = cuda_config;
  return m;
}

}  // namespace veloxquant
