// Runtime tests run every registered method inside a model; a calibrated method
// (veloxquant/calibration.h) needs an artifact fitted to that model. This makes one per model and
// method, once per test process, from tokens other than the ones the tests evaluate, and names
// it in the spec.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "veloxquant/calibrate.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace veloxquant::test {

// The directories made here, removed when the test process ends.
struct CalibrationDirs {
  std::map<std::string, std::string> made;  // "method@weights hash" -> directory
  ~CalibrationDirs() {
    for (const auto& [key, dir] : made) std::filesystem::remove_all(dir);
  }
};

// `spec` (a method name, optionally with parameters) as the tests run it in `model`: unchanged
// for a method without calibration, else with artifacts= a directory calibrated for `model` on
// `calibration` (BOS first), by default 256 tokens cycling through its vocabulary in another
// order than long_prompt's.
inline std::string runnable_spec(const Model& model, const std::string& spec,
                                 std::vector<int32_t> calibration = {}) {
  const Spec parsed = parse_spec(spec);
  if (!parsed.method->calibrated()) return spec;
  static CalibrationDirs dirs;
  const ModelIdentity id = model_identity(model);
  const std::string key = parsed.to_string() + "@" + std::to_string(id.weights_hash);
  auto it = dirs.made.find(key);
  if (it == dirs.made.end()) {
    const std::string dir = (std::filesystem::path(::testing::TempDir()) /
                             ("vq_calibration_" + std::to_string(::getpid()) + "_" +
                              std::to_string(dirs.made.size())))
                                .string();
    if (calibration.empty()) {
      calibration.push_back(std::max(model.tokenizer().bos(), 0));
      for (size_t i = 1; i < 256; ++i) calibration.push_back(static_cast<int32_t>((i * 5 + 1) % model.config().vocab));
    }
    const size_t context = std::min<size_t>(calibration.size(), 256);
    save_calibration(calibrate(model, calibration, parsed, {.context = context, .max_tokens = 0}), dir);
    it = dirs.made.emplace(key, dir).first;
  }
  Spec with_artifacts = parsed;  // artifacts= is the calibrated method's, before a wrapper's inner quantizer
  with_artifacts.params.strings["artifacts"] = it->second;
  return with_artifacts.to_string();
}

}  // namespace veloxquant::test
