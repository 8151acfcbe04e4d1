// `veloxquant eval`: every KV-cache method measured on one model in one run (bytes, perplexity
// against the fp16 baseline, retrieval, speed, memory), written as results.json, a markdown
// table and plots, with a recommendation under a quality guardrail.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "eval/eval_report.h"
#include "eval/method_eval.h"
#include "veloxquant/eval.h"
#include "run_stats.h"

namespace veloxquant::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string model, text, out;
  EvalOptions options;
  std::optional<double> recommend;
  double max_kl = 0.05, recall_tolerance = 0.02;
  bool plots = true;
  int threads = 1;
};

// The plots come from a Python script (matplotlib) reading results.json.
void make_plots(const fs::path& out) {
  const std::string python = VELOXQUANT_SOURCE_DIR "/.venv/bin/python";
  const std::string script = VELOXQUANT_SOURCE_DIR "/scripts/eval_plots.py";
  const std::string command = fmt::format("'{}' '{}' '{}'", script, out.string(), out.string());
  if (!fs::exists(python)) {
    fmt::print(stderr, "plots: no .venv python beside the sources; run `python3 {}` (needs matplotlib)\n", command);
    return;
  }
  if (std::system(("'" + python + "' " + command).c_str()) != 0)
    fmt::print(stderr, "plots: the plot script failed; run `{} {}` to see why\n", python, command);
}

void print_recommendation(const std::vector<MethodEval>& rows, const Guardrail& g) {
  fmt::print("\nrecommendation: the smallest cache within perplexity {:+.2f} %, KL {:.4f} nats and "
             "retrieval {:.1f} points of fp16\n", g.max_delta_pct, g.max_kl, 100.0 * g.recall_tolerance);
  const std::optional<size_t> best = recommend(rows, g);
  const size_t limit = best ? rows[*best].bytes() : 0;
  if (best) {
    const MethodEval& r = rows[*best];
    fmt::print("  {}\n  {} B vs {} B fp16 ({:.2f}x, {:.2f} bits/element); perplexity {:.3f} ({:+.2f} %), "
               "KL {:.4f}, top-1 {:.1f} %, retrieval {:.1f} % (fp16 {:.1f} %)\n",
               r.spec, grouped(r.bytes()), grouped(r.fp16_bytes), r.compression_ratio(), r.bits_per_element(),
               r.perplexity, r.perplexity_delta_pct, r.kl_mean, 100.0 * r.top1_agreement,
               100.0 * r.retrieval_mean, 100.0 * rows[0].retrieval_mean);
  } else {
    fmt::print("  none: no method stays within the guardrail; keep fp16\n");
  }
  // The evidence against every smaller cache.
  bool header = false;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (best && rows[i].bytes() >= limit) continue;
    if (!header) fmt::print("  {}:\n", best ? "smaller caches that fail it" : "why each fails");
    header = true;
    fmt::print("    {} ({:.2f}x): {}\n", rows[i].spec, rows[i].compression_ratio(),
               guardrail_failures(rows[i], rows[0], g));
  }
}

void run(const EvalArgs& a) {
  set_threads(a.threads);
  const auto start = std::chrono::steady_clock::now();
  const Model model = Model::load(a.model);
  std::optional<fs::path> out;
  if (!a.out.empty()) {
    out = a.out;
    std::error_code ec;
    fs::create_directories(*out, ec);
    if (!fs::is_directory(*out)) throw Error("--out '" + a.out + "' is not a directory and cannot be made one");
  }
  const EvalRun run = run_eval(model, read_text(a.text), a.options,
                               [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  std::optional<Guardrail> guardrail;
  if (a.recommend) guardrail = Guardrail{*a.recommend, a.max_kl, a.recall_tolerance};

  const std::string markdown = results_markdown(run.setup, run.rows);
  fmt::print("{}", markdown);
  if (guardrail) print_recommendation(run.rows, *guardrail);
  if (out) {
    write_text((*out / "results.json").string(), results_json(run.setup, run.rows, guardrail));
    write_text((*out / "results.md").string(), markdown);
    if (a.plots) make_plots(*out);
    fmt::print(stderr, "results in {}\n", out->string());
  }
  fmt::print(stderr, "eval: {} methods in {}\n", run.rows.size(),
             minutes(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval", "Measure the fp16 baseline and every KV-cache method on a model (bytes, perplexity, KL, "
              "retrieval, speed, memory), write results.json, a markdown table and plots, and "
              "recommend the smallest cache within a quality guardrail");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->each([a](const std::string& path) {
    a->options.model_name = path;
  });
  cmd->add_option("-f,--text", a->text, "text file: perplexity chunks and the retrieval haystack")
      ->required()
      ->each([a](const std::string& path) { a->options.text_name = path; });
  cmd->add_option("--kv", a->options.kv,
                  "method specs, space-separated; `all`: every registered quantizer at its defaults (a "
                  "calibrated one, such as kvquant_nuq, is named with its artifacts=DIR), "
                  "then every eviction policy alone (fp16 storage) at a budget of ctx/2 tokens; fp16 "
                  "is always measured first")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", a->options.context,
                  "tokens per perplexity chunk (default 2048, or the model's context when shorter)")
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", a->options.chunks, "perplexity chunks")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--retrieval", a->options.retrieval, "retrieval sequence lengths, comma-separated (default ctx/2,ctx)")
      ->delimiter(',');
  cmd->add_option("--depths", a->options.depths, "needle depths, comma-separated (0: after BOS, 1: before the repeat)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--needle", a->options.needle_tokens, "needle length in tokens")->capture_default_str();
  cmd->add_option("--trials", a->options.trials, "retrieval sequences per length and depth")->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "seed of the needles' random tokens")->capture_default_str();
  cmd->add_option("--tasks", a->options.tasks,
                  "long-context tasks in RULER's manner, comma-separated: niah_multikey, niah_multivalue, "
                  "variable_tracking, common_words (default none)")
      ->delimiter(',');
  cmd->add_option("--task-lengths", a->options.task_lengths,
                  "tokens per task sample, prompt and answer, comma-separated (default ctx)")
      ->delimiter(',');
  cmd->add_option("--task-samples", a->options.task_samples, "samples per task and length")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--decode-tokens", a->options.decode_tokens, "decode steps timed after a prompt filling the rest of --ctx")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--out", a->out, "directory for results.json, results.md and the plots");
  cmd->add_option("--recommend", a->recommend,
                  "print the smallest cache whose perplexity rises at most MAXDELTA percent over fp16 "
                  "(and within --max-kl and --recall-tolerance), with the evidence")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--max-kl", a->max_kl, "guardrail: mean KL divergence from fp16, nats per token")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--recall-tolerance", a->recall_tolerance,
                  "guardrail: how far mean retrieval may fall below fp16's (fraction, 0.02 = 2 points)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--observe", a->options.observe,
                "also observe each method's caches over a prompt of ctx/2 tokens, per layer and KV head "
                "(reconstruction and attention errors against exact fp32, times, bytes, key norms, "
                "sink mass), into results.json");
  cmd->add_flag("!--no-plots", a->plots, "write no plots");
  add_threads_option(cmd, a->threads);
  add_device_options(cmd, a->options.device, a->options.gpu_weights);
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
