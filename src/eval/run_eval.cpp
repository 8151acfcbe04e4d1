// `veloxquant eval`'s run: settings checked, specs expanded and built for the model before any
// measurement, then the fp16 baseline and every spec measured in order against it.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "eval/eval_report.h"
#include "eval/method_eval.h"
#include "veloxquant/error.h"
#include "veloxquant/threads.h"

namespace veloxquant {
namespace {

namespace fs = std::filesystem;

// A temporary file for the baseline's log-probabilities (hundreds of MB at long contexts), removed
// when the run ends, however it ends.
struct TempFile {
  fs::path path;
  TempFile() : path(fs::temp_directory_path() / fmt::format("veloxquant-eval-{}.logprobs", ::getpid())) {}
  ~TempFile() {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
};

}  // namespace

std::string minutes(double seconds) {
  const long s = std::lround(seconds);
  return fmt::format("{}m{:02}s", s / 60, s % 60);
}

EvalRun run_eval(const Model& model, std::string_view text, const EvalOptions& options,
                 const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const size_t model_context = model.config().context_length;
  const size_t context = options.context ? options.context : std::min<size_t>(2048, model_context);
  if (context > model_context) {
    throw Error(fmt::format("ctx {} exceeds the model's context of {}; expected at most {}", context,
                            model_context, model_context));
  }
  // Bad specs fail here, before any measurement.
  std::vector<std::string> specs = expand_eval_specs(options.kv, context / 2);
  check_specs_fit(specs, model);
  std::vector<DeviceSkip> skipped;
  if (options.device == Device::Cuda) {
    if (options.observe)
      throw Error("eval --observe reads the caches on the host; expected --device cpu with it");
    skipped = drop_specs_off_cuda(specs, options.kv, model);
    for (const DeviceSkip& k : skipped)
      if (progress) progress("eval: left out on the GPU: " + k.reason);
  }
  if (options.decode_tokens >= context) {
    throw Error(fmt::format("decode_tokens {} leaves no prompt in a context of {}; expected fewer than {}",
                            options.decode_tokens, context, context));
  }
  const std::vector<size_t> retrieval =
      options.retrieval.empty() ? std::vector<size_t>{context / 2, context} : options.retrieval;
  for (const size_t length : retrieval) {
    if (length > model_context) {
      throw Error(fmt::format("retrieval length {} exceeds the model's context of {}; expected at most {}",
                              length, model_context, model_context));
    }
  }
  if (!options.tasks.empty())
    check_long_tasks(options.tasks, options.task_lengths, options.task_samples, model_context);
  // No BOS: retrieval and decode put their own first.
  const std::vector<int32_t> haystack = model.tokenizer().encode(text, /*add_special=*/false);

  const TempFile baseline_file;
  MethodEvalOptions o;
  o.context = context;
  o.chunks = options.chunks;
  o.needle.lengths = retrieval;
  o.needle.depths = options.depths;
  o.needle.needle_tokens = options.needle_tokens;
  o.needle.trials = options.trials;
  o.needle.seed = options.seed;
  o.tasks.tasks = options.tasks;
  o.tasks.lengths = options.task_lengths.empty() ? std::vector<size_t>{context} : options.task_lengths;
  o.tasks.samples = options.task_samples;
  o.tasks.seed = options.seed;
  o.decode_tokens = options.decode_tokens;
  o.observe_tokens = options.observe ? context / 2 : 0;
  o.baseline_logprobs = baseline_file.path.string();
  o.device = options.device;
  o.gpu_weights = options.gpu_weights;

  EvalRun run;
  for (size_t i = 0; i < specs.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string eta = i == 0 ? "" : "  ETA " + minutes(elapsed / static_cast<double>(i) *
                                                            static_cast<double>(specs.size() - i));
    auto stage = [&](const std::string& what) {
      if (!progress) return;
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress(fmt::format("[{}/{}] {}: {}  elapsed {}{}", i + 1, specs.size(), specs[i], what, minutes(now), eta));
    };
    run.rows.push_back(
        evaluate_method(model, text, haystack, specs[i], i == 0 ? nullptr : &run.rows[0], o, stage));
  }

  EvalSetup& setup = run.setup;
  setup.model = options.model_name;
  setup.text = options.text_name;
  setup.context = context;
  setup.chunks = run.rows[0].chunks;
  setup.scored_tokens = run.rows[0].scored_tokens;
  setup.retrieval_lengths = retrieval;
  setup.retrieval_depths = options.depths;
  setup.needle_tokens = options.needle_tokens;
  setup.trials = options.trials;
  setup.seed = options.seed;
  if (!options.tasks.empty()) {
    setup.tasks = options.tasks;
    setup.task_lengths = o.tasks.lengths;
    setup.task_samples = options.task_samples;
  }
  setup.decode_prompt = context - options.decode_tokens;
  setup.decode_tokens = options.decode_tokens;
  setup.observed_tokens = o.observe_tokens;
  setup.threads = threads();
  if (options.device == Device::Cuda)
    setup.device = fmt::format("cuda ({} weights)", options.gpu_weights == GpuWeights::F32 ? "f32" : "f16");
  setup.skipped = std::move(skipped);
  return run;
}

std::string evaluate_methods_json(const Model& model, std::string_view text, const EvalOptions& options,
                                  const std::optional<Guardrail>& guardrail,
                                  const std::function<void(const std::string&)>& progress) {
  const EvalRun run = run_eval(model, text, options, progress);
  return results_json(run.setup, run.rows, guardrail);
}

}  // namespace veloxquant
