#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/common/turboquant_values.h"
#include "codecs/spectral/method.h"
#include "codecs/spectral/spectral_fit.h"
#include "codecs/spectral/spectral_key_codec.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr const char* kName = "spectral";
// How far a stored rotation's rows may be from orthonormal: f32 rounding of double eigenvectors
// leaves about 1e-7; anything near this is not a rotation the fit wrote.
constexpr double kOrthonormalTolerance = 1e-4;

unsigned bits_of(const Params& p) { return static_cast<unsigned>(p.get_int("bits")); }

size_t signal_of(const Params& p, size_t d) {
  const auto s = static_cast<size_t>(p.get_int("signal"));
  if (s > d) {
    throw SpecError(fmt::format("{}: signal={} signal directions of head_dim {}; expected at most {} "
                                "(or 0: the participation ratio)", kName, s, d, d));
  }
  return s;
}

spectral::AllocationRule rule_of(const Params& p, size_t d) {
  return {bits_of(p), signal_of(p, d), p.get_choice("alloc") == "waterfill"};
}

LayerCalibration fit(const Params& p, const CalibrationSamples& s) {
  const spectral::AllocationRule rule = rule_of(p, s.head_dim);
  LayerCalibration out;
  out.heads.resize(s.kv_heads);
  for (size_t h = 0; h < s.kv_heads; ++h) {
    spectral::FittedHead f = spectral::fit_head(s.keys.data() + h * s.head_dim, s.tokens,
                                                s.kv_heads * s.head_dim, s.head_dim, rule);
    out.heads[h]["key.rotation"] = std::move(f.rotation);
    out.heads[h]["key.eigenvalues"] = std::move(f.eigenvalues);
    out.heads[h]["key.signal.levels"] = std::move(f.signal_levels);
    out.heads[h]["key.noise.center"] = std::move(f.noise_center);
    out.heads[h]["key.noise.scale"] = std::move(f.noise_scale);
    out.heads[h]["key.noise.levels"] = std::move(f.noise_levels);
  }
  return out;
}

void require_ascending(std::span<const float> levels, size_t head, const char* table) {
  for (size_t i = 1; i < levels.size(); ++i) {
    if (!(levels[i] >= levels[i - 1])) {
      throw FormatError(fmt::format("{}: calibration table '{}' of KV head {} is not ascending at "
                                    "index {}", kName, table, head, i));
    }
  }
}

// One KV head's basis from its tables, each checked the way fit() writes it.
spectral::HeadBasis basis_of(const LayerCalibration& cal, size_t head, size_t d, const spectral::AllocationRule& rule) {
  const std::span<const float> eigenvalues = cal.table(head, "key.eigenvalues", d);
  for (size_t j = 0; j < d; ++j) {
    if (eigenvalues[j] < 0 || (j > 0 && eigenvalues[j] > eigenvalues[j - 1])) {
      throw FormatError(fmt::format("{}: eigenvalue {} of KV head {} is {}; expected >= 0 and descending",
                                    kName, j, head, eigenvalues[j]));
    }
  }
  const spectral::Allocation a = spectral::allocate(eigenvalues, rule);
  const std::span<const float> rotation = cal.table(head, "key.rotation", d * d);
  for (size_t i = 0; i < d; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (size_t c = 0; c < d; ++c) dot += static_cast<double>(rotation[i * d + c]) * rotation[j * d + c];
      if (std::fabs(dot - (i == j ? 1.0 : 0.0)) > kOrthonormalTolerance) {
        throw FormatError(fmt::format("{}: the rotation of KV head {} is not orthonormal: rows {} and {} "
                                      "have dot product {}; expected {}", kName, head, i, j, dot, i == j ? 1 : 0));
      }
    }
  }
  const std::span<const float> signal_levels = cal.table(head, "key.signal.levels", a.signal_levels());
  const std::span<const float> centre = cal.table(head, "key.noise.center", d - a.signal);
  const std::span<const float> scale = cal.table(head, "key.noise.scale", d - a.signal);
  const std::span<const float> noise_levels = cal.table(head, "key.noise.levels", a.noise_levels());
  spectral::HeadBasis b;
  b.rotation.assign(rotation.begin(), rotation.end());
  b.bits = a.bits;
  size_t at = 0;
  for (size_t j = 0; j < a.signal; ++j) {
    const std::span<const float> l = signal_levels.subspan(at, size_t{1} << a.bits[j]);
    require_ascending(l, head, "key.signal.levels");
    b.levels.insert(b.levels.end(), l.begin(), l.end());
    at += l.size();
  }
  for (size_t j = a.signal; j < d; ++j) {
    const float s = scale[j - a.signal];
    if (!(s > 0)) {
      throw FormatError(fmt::format("{}: noise scale of direction {} of KV head {} is {}; expected > 0",
                                    kName, j, head, s));
    }
    size_t first = 0;  // this width's codebook within key.noise.levels
    for (unsigned w : a.noise_widths) {
      if (w == a.bits[j]) break;
      first += size_t{1} << w;
    }
    const std::span<const float> l = noise_levels.subspan(first, size_t{1} << a.bits[j]);
    require_ascending(l, head, "key.noise.levels");
    for (float v : l) b.levels.push_back(centre[j - a.signal] + s * v);
  }
  return b;
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  if (s.head_dim < 2) {
    throw SpecError(fmt::format("{}: head_dim {}; expected >= 2 (the values' random rotation needs a "
                                "circle to turn)", kName, s.head_dim));
  }
  const size_t d = s.head_dim;
  const spectral::AllocationRule rule = rule_of(p, d);
  const LayerCalibration& cal = layer_calibration(kName, p, s);
  std::vector<spectral::HeadBasis> heads;
  for (size_t h = 0; h < s.kv_heads; ++h) heads.push_back(basis_of(cal, h, d, rule));
  LayerCodecs c;
  c.key = std::make_unique<spectral::SpectralKeyCodec>(d, rule.bits * d, std::move(heads));
  c.value = turboquant_values(p, s);
  return c;
}

}  // namespace

MethodInfo spectral_method() {
  MethodInfo m;
  m.name = kName;
  m.family = "spectral";
  m.paper = "SpectralQuant, 3% Is All You Need: Breaking TurboQuant's Compression Limit via Spectral "
            "Structure";
  m.summary = "keys rotated into their calibrated eigenbasis, bits by reverse water-filling on the "
              "eigenvalues, own levels for the signal directions, shared ones for the noise; values: "
              "turboquant_mse (calibrated)";
  m.params = {
      ParamDef::integer("bits", 3, 1, 8, "average key bits per coordinate (water-filled over directions)"),
      ParamDef::integer("signal", 0, 0, 1024,
                        "signal directions with levels of their own; 0: the participation ratio"),
      ParamDef::choice("alloc", {"waterfill", "uniform"}, "waterfill",
                       "bits per eigen-direction: reverse water-filling on the eigenvalues, or `bits` "
                       "everywhere (an ablation)"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate (turboquant_mse)"),
      artifacts_param(true),
  };
  m.make = make;
  m.fit = fit;
  return m;
}

}  // namespace veloxquant
