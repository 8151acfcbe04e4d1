// How a calibrated method finds its tables: the spec's artifacts= directory is read once per
// cache (or once per session), and each layer's make() checks that the artifact fits its layer
// before reading a table.
#include <fmt/format.h>

#include <filesystem>

#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/precomputed.h"

namespace veloxquant {

std::span<const float> LayerCalibration::table(size_t head, std::string_view name, size_t expected) const {
  if (head >= heads.size()) {
    throw FormatError(fmt::format("calibration holds {} KV heads; table '{}' of KV head {} was asked for",
                                  heads.size(), name, head));
  }
  const auto it = heads[head].find(name);
  if (it == heads[head].end()) {
    throw FormatError(fmt::format("calibration of KV head {} has no table '{}'", head, name));
  }
  if (it->second.size() != expected) {
    throw FormatError(fmt::format("calibration table '{}' of KV head {} holds {} values; expected {}",
                                  name, head, it->second.size(), expected));
  }
  return it->second;
}

std::string calibrated_spec_text(const Spec& spec) {
  Spec quantizer;  // a wrapper's inner quantizer included, the eviction policy left out
  quantizer.method = spec.method;
  quantizer.params = spec.params;
  if (quantizer.params.strings.contains("artifacts")) quantizer.params.strings["artifacts"].clear();
  return quantizer.to_string();
}

LayerShape with_calibration(const Spec& spec, LayerShape shape) {
  const auto it = spec.params.strings.find("artifacts");
  if (it == spec.params.strings.end() || it->second.empty()) return shape;
  const std::string& dir = it->second;
  // A calibrated method's directory may hold precomputed tables too; any other's must. A name the
  // file system refuses (too long, say) holds none: the loads below say what is missing.
  std::error_code ec;
  if (!spec.method->calibrated() || std::filesystem::exists(precomputed_path(dir), ec)) load_precomputed(dir);
  if (spec.method->calibrated() && !shape.calibration) shape.calibration = load_calibration(dir, spec);
  return shape;
}

const LayerCalibration& layer_calibration(std::string_view method, const Params& params,
                                          const LayerShape& shape) {
  Spec spec;
  spec.method = &find_method(method);
  spec.params = params;
  const CalibrationArtifact* a = shape.calibration.get();
  if (a == nullptr) {
    throw Error(fmt::format("{} needs calibration and got none: run `veloxquant calibrate -m MODEL "
                            "-f TEXT --kv {} -o DIR` and add artifacts=DIR to the spec", method,
                            calibrated_spec_text(spec)));
  }
  const std::string wanted = calibrated_spec_text(spec);
  std::string differs;
  auto check = [&](const char* what, size_t expected, size_t found) {
    if (expected != found) differs += fmt::format("{}{}: artifact {}, cache {}", differs.empty() ? "" : "; ", what, found, expected);
  };
  check("layers", static_cast<size_t>(shape.layers), a->layers.size());
  check("KV heads", shape.kv_heads, a->kv_heads);
  check("head_dim", shape.head_dim, a->head_dim);
  if (a->spec != wanted) differs += fmt::format("{}method: artifact '{}', cache '{}'", differs.empty() ? "" : "; ", a->spec, wanted);
  if (!differs.empty()) {
    throw Error(fmt::format("{}: the calibration artifact was made for another model or method ({}); "
                            "calibrate again for this one", method, differs));
  }
  if (shape.layer < 0 || static_cast<size_t>(shape.layer) >= a->layers.size()) {
    throw Error(fmt::format("{}: layer {} is outside the artifact's {} layers", method, shape.layer,
                            a->layers.size()));
  }
  return a->layers[static_cast<size_t>(shape.layer)];
}

void check_calibration_model(const CalibrationArtifact& artifact, const ModelIdentity& model) {
  const std::string differs = describe_differences(model, artifact.model);
  if (!differs.empty()) {
    throw Error(fmt::format("calibration artifact for '{}' was made with another model ({}); "
                            "calibrate again with this model", artifact.spec, differs));
  }
}

}  // namespace veloxquant
