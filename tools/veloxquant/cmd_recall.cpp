// `veloxquant recall`: needle recall of a model with any KV-cache method (src/eval/needle_recall.h):
// how often the model copies a random needle planted in a text back at the end, by sequence
// length and needle depth.
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/needle_recall.h"
#include "run_stats.h"
#include "veloxquant/method.h"

namespace veloxquant::cli {
namespace {

struct RecallArgs {
  std::string model, file;
  NeedleOptions options;
  int threads = 1;
  bool json = false;
};

void print_table(const NeedleOptions& o, const NeedleResult& r) {
  fmt::print("{:>8}", "depth");
  for (const size_t length : o.lengths) fmt::print("  {:>9}", length);
  fmt::print("\n");
  // Cells come length by length, each with every depth: cell (length i, depth j) is at
  // i * depths + j.
  for (size_t j = 0; j < o.depths.size(); ++j) {
    fmt::print("{:>8.2f}", o.depths[j]);
    for (size_t i = 0; i < o.lengths.size(); ++i)
      fmt::print("  {:>8.1f}%", 100.0 * r.cells[i * o.depths.size() + j].recall);
    fmt::print("\n");
  }
}

void run(RecallArgs& a) {
  set_threads(a.threads);
  const Model model = Model::load(a.model);
  // No BOS here: needle_recall starts every sequence with its own.
  const std::vector<int32_t> haystack = model.tokenizer().encode(read_text(a.file), /*add_special=*/false);
  a.options.progress = [](size_t done, size_t total) { show_progress(done, total, "sequences"); };
  const auto start = std::chrono::steady_clock::now();
  const NeedleResult r = needle_recall(model, haystack, a.options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const NeedleOptions& o = a.options;
  const std::string kv = parse_spec(o.kv_spec).to_string();
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["text"] = a.file;
    j["kv"] = kv;
    j["haystack_tokens"] = haystack.size();
    j["needle_tokens"] = o.needle_tokens;
    j["trials"] = o.trials;
    j["seed"] = o.seed;
    j["cells"] = nlohmann::ordered_json::array();
    for (const NeedleCell& c : r.cells) {
      j["cells"].push_back({{"length", c.length}, {"depth", c.depth}, {"recall", c.recall},
                            {"scored", c.scored}, {"kv_bytes", c.kv_bytes},
                            {"kv_fp16_bytes", c.kv_fp16_bytes}});
    }
    j["mean_recall"] = r.mean_recall;
    j["seconds"] = seconds;
    j["threads"] = a.threads;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("needle recall, kv {}: {}-token needles, {} trial{} per cell, seed {}, haystack {} tokens\n\n",
             kv, o.needle_tokens, o.trials, o.trials == 1 ? "" : "s", o.seed, grouped(haystack.size()));
  print_table(o, r);
  fmt::print("\nmean recall: {:.1f}%  ({} scored tokens per cell)\n", 100.0 * r.mean_recall,
             r.cells.front().scored);
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    const NeedleCell& c = r.cells[i * o.depths.size()];
    fmt::print("kv cache at {} tokens: {}\n", c.length, kv_summary(c.kv_bytes, c.kv_fp16_bytes));
  }
  fmt::print("time: {:.2f} s, {} thread{}\n", seconds, a.threads, a.threads == 1 ? "" : "s");
}

}  // namespace

Command add_recall_command(CLI::App& app) {
  auto a = std::make_shared<RecallArgs>();
  auto* cmd = app.add_subcommand(
      "recall", "Needle recall: plant random tokens in a text, repeat them at the end, and score how "
                "many the model copies back through the KV cache, by length and depth");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->file, "text file the needles are hidden in")->required();
  cmd->add_option("--kv", a->options.kv_spec, "KV-cache method spec (see `veloxquant methods`)")->capture_default_str();
  cmd->add_option("--lengths", a->options.lengths, "sequence lengths in tokens, comma-separated")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--depths", a->options.depths,
                  "where the first copy sits in the text, comma-separated (0: after BOS, 1: just "
                  "before the final copy)")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--needle", a->options.needle_tokens, "needle length in tokens")->capture_default_str();
  cmd->add_option("--trials", a->options.trials, "sequences per cell, each from another part of the text")
      ->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "seed of the needles' random tokens")->capture_default_str();
  add_threads_option(cmd, a->threads);
  cmd->add_flag("--json", a->json, "print the results as one JSON object");
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
