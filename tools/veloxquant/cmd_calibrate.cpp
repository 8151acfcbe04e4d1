// `veloxquant calibrate`: runs a model over calibration text, fits a calibrated method's
// parameters to the keys and values its layers receive, and saves them as DIR/METHOD.vqcal for
// specs to load with artifacts=DIR.
#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/calibrate.h"
#include "veloxquant/model.h"

namespace veloxquant::cli {
namespace {

struct CalibrateArgs {
  std::string model, file, kv, out;
  CalibrateOptions options;
  int threads = 1;
};

void run(const CalibrateArgs& a) {
  set_threads(a.threads);
  const Spec spec = parse_spec(a.kv);
  const Model model = Model::load(a.model);
  const auto start = std::chrono::steady_clock::now();
  const SavedCalibration saved = calibrate_into(model, read_text(a.file), spec, a.out, a.options);
  const CalibrationArtifact& artifact = saved.artifact;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("calibrated {} on {} tokens of {} ({} layers x {} KV heads x {}) in {:.1f} s\n",
             artifact.spec, grouped(artifact.tokens), a.file, artifact.layers.size(), artifact.kv_heads,
             artifact.head_dim, seconds);
  if (spec.method->describe_calibration) {
    LayerShape shape{artifact.kv_heads, artifact.head_dim, 0, 0, static_cast<int>(artifact.layers.size())};
    shape.calibration = std::make_shared<const CalibrationArtifact>(artifact);
    fmt::print("{}\n", spec.method->describe_calibration(spec.params, shape));
  }
  fmt::print("saved {}; use it with --kv {}\n", saved.path, saved.spec);
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Fit a calibrated method (codebooks, ranges, ...) to a model's keys and values over "
                   "a text, and save them for specs to load with artifacts=DIR");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->file, "calibration text file")->required();
  cmd->add_option("--kv", a->kv, "the calibrated method's spec, e.g. kvquant_nuq:bits=3")->required();
  cmd->add_option("-o,--out", a->out, "directory the artifact is written to (DIR/METHOD.vqcal)")->required();
  cmd->add_option("-c,--ctx", a->options.context, "tokens per chunk the model runs")
      ->capture_default_str()->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--max-tokens", a->options.max_tokens, "calibration tokens used at most (0: the whole text)")
      ->capture_default_str();
  add_threads_option(cmd, a->threads);
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
