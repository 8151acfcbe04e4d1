// The calibration pass: the model runs over text through fp16 caches exactly as perplexity runs
// it, and what every layer's cache received (keys after RoPE, values) is what the method fits to;
// a method that stores keys before RoPE gets them rotated back to before it.
// Reading the caches back costs nothing extra: fp16 is what an fp16 cache would hold anyway.
#include "veloxquant/calibrate.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/model/uniform_layers.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace veloxquant {

namespace {

void require_fit(const Spec& spec) {
  if (spec.method->calibrated()) return;
  std::string names;
  for (const MethodInfo& m : registered_methods())
    if (m.calibrated()) names += (names.empty() ? "" : ", ") + m.name;
  throw SpecError(
      fmt::format("{} has nothing to calibrate; calibrated methods: {}", spec.method->name, names));
}

}  // namespace

CalibrationArtifact calibrate(const Model& model, std::string_view text, const Spec& spec,
                              const CalibrateOptions& o) {
  require_fit(spec);
  return calibrate(model, model.tokenizer().encode(text, /*add_bos=*/true), spec, o);
}

CalibrationArtifact calibrate(const Model& model, std::span<const int32_t> tokens, const Spec& spec,
                              const CalibrateOptions& o) {
  require_fit(spec);
  const ModelConfig& c = model.config();
  runtime::require_uniform_layers(c, "calibrate",
                                  "a calibration artifact holds one KV-head shape for all layers");
  const size_t ctx = o.context;
  if (ctx < 2) throw Error(fmt::format("calibration context {} is too small; expected >= 2", ctx));
  const Tokenizer& tok = model.tokenizer();
  size_t chunks = tokens.size() / ctx;
  if (o.max_tokens) chunks = std::min(chunks, std::max<size_t>(1, o.max_tokens / ctx));
  if (chunks == 0) {
    throw Error(fmt::format("the calibration text has {} tokens; expected at least one chunk of {}",
                            tokens.size(), ctx));
  }
  const bool bos = tok.bos() >= 0 && tokens[0] == tok.bos();  // Session::eval checks the ids
  const size_t row = size_t{c.kv_heads} * c.head_dim;
  std::vector<std::vector<float>> keys(c.layers), values(c.layers);
  for (auto* v : {&keys, &values})
    for (auto& layer : *v) layer.reserve(chunks * ctx * row);
  Session session(model, SessionOptions{"fp16", ctx});
  const size_t step = c.sliding_window ? std::min<size_t>(ctx, c.sliding_window - 1) : ctx;
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    std::vector<int32_t> batch(tokens.begin() + static_cast<std::ptrdiff_t>(chunk * ctx),
                               tokens.begin() + static_cast<std::ptrdiff_t>((chunk + 1) * ctx));
    if (bos) batch[0] = tok.bos();  // every chunk starts as perplexity starts it, with its sink
    session.reset();
    // A sliding-window layer drops what lies outside its window after each step: steps shorter
    // than the window keep every token of the step, read back as the cache's newest rows.
    for (size_t from = 0; from < ctx; from += step) {
      const size_t n = std::min(step, ctx - from);
      session.eval(std::span(batch).subspan(from, n), Logits::None);
      for (size_t l = 0; l < c.layers; ++l) {
        const KVCache& cache = session.caches()[l];
        const std::vector<float> k = cache.decode_keys(), v = cache.decode_values();
        const size_t first = k.size() - n * row;
        std::vector<float> step_keys(k.begin() + static_cast<std::ptrdiff_t>(first), k.end());
        if (spec.method->keys_before_rope) {
          // Token t of a chunk sits at position t: R(-t) undoes its rotation (R(t) is orthogonal).
          for (size_t t = 0; t < n; ++t)
            apply_rope(cache.shape().rope, step_keys.data() + t * row, c.kv_heads, c.head_dim,
                       -static_cast<int64_t>(from + t));
        }
        keys[l].insert(keys[l].end(), step_keys.begin(), step_keys.end());
        values[l].insert(values[l].end(), v.begin() + static_cast<std::ptrdiff_t>(first), v.end());
      }
    }
  }
  CalibrationArtifact a;
  a.spec = calibrated_spec_text(spec);
  a.model = model_identity(model);
  a.kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.tokens = chunks * ctx;
  for (size_t l = 0; l < c.layers; ++l) {
    const CalibrationSamples samples{keys[l], values[l], chunks * ctx, c.kv_heads, c.head_dim, ctx};
    a.layers.push_back(spec.method->fit(spec.params, samples));
    std::vector<float>().swap(keys[l]);  // a layer's samples are not needed once it is fitted
    std::vector<float>().swap(values[l]);
  }
  return a;
}

std::shared_ptr<const CalibrationArtifact> calibrate_on_samples(const Spec& spec,
                                                                const CalibrationSamples& samples,
                                                                int layers) {
  require_fit(spec);
  if (layers < 1) throw Error(fmt::format("calibrate_on_samples: layers={}; expected >= 1", layers));
  auto a = std::make_shared<CalibrationArtifact>();
  a->spec = calibrated_spec_text(spec);
  a->kv_heads = static_cast<uint32_t>(samples.kv_heads);
  a->head_dim = static_cast<uint32_t>(samples.head_dim);
  a->tokens = samples.tokens;
  a->model.architecture = "samples";
  a->model.layers = static_cast<uint32_t>(layers);
  a->model.kv_heads = a->kv_heads;
  a->model.head_dim = a->head_dim;
  a->model.vocab = 1;  // no vocabulary; a well-formed identity has one of at least 1 entry
  a->layers.assign(static_cast<size_t>(layers), spec.method->fit(spec.params, samples));
  return a;
}

SavedCalibration calibrate_into(const Model& model, std::string_view text, const Spec& spec,
                                const std::string& dir, const CalibrateOptions& options) {
  // A spec naming artifacts already would be read, not written: say which directory is meant.
  if (spec.method->calibrated() && !spec.params.get_text("artifacts").empty()) {
    throw Error(fmt::format("calibrate writes the artifacts to the output directory '{}'; expected a spec "
                            "without artifacts=, got '{}'",
                            dir, spec.to_string()));
  }
  SavedCalibration saved{calibrate(model, text, spec, options), calibration_path(dir, spec.method->name), {}};
  save_calibration(saved.artifact, dir);
  Spec with_artifacts = spec;  // artifacts= is the calibrated method's: before a wrapper's inner quantizer
  with_artifacts.params.strings["artifacts"] = dir;
  saved.spec = with_artifacts.to_string();
  return saved;
}

}  // namespace veloxquant
