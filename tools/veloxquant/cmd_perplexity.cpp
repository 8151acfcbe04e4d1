// `veloxquant perplexity`: llama.cpp-compatible perplexity of a text file with any KV-cache
// method, and KL divergence / top-1 agreement against a saved fp16 baseline.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/method.h"
#include "veloxquant/perplexity.h"

namespace veloxquant::cli {
namespace {

struct PerplexityArgs {
  std::string model, file;
  PerplexityOptions options;
  int threads = 1;
  bool json = false;
};

void run(PerplexityArgs& a) {
  set_threads(a.threads);
  const Model model = Model::load(a.model);
  const std::string text = read_text(a.file);
  a.options.progress = [](size_t done, size_t total, double ppl) {
    show_progress(done, total, fmt::format("chunks  PPL {:.4f}", ppl));
  };
  const PerplexityResult r = compute_perplexity(model, text, a.options);
  const std::string kv = parse_spec(a.options.kv_spec).to_string();
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["text"] = a.file;
    j["kv"] = kv;
    j["device"] = a.options.device == Device::Cuda ? "cuda" : "cpu";
    if (a.options.device == Device::Cuda) j["gpu_weights"] = a.options.gpu_weights == GpuWeights::F32 ? "f32" : "f16";
    j["context"] = r.context;
    j["chunks"] = r.chunks;
    j["text_tokens"] = r.text_tokens;
    j["scored_tokens"] = r.scored_tokens;
    j["perplexity"] = r.perplexity;
    j["perplexity_error"] = r.perplexity_error;
    j["mean_nll"] = r.mean_nll;
    if (r.compared) {
      j["kl_mean"] = r.kl_mean;
      j["kl_error"] = r.kl_error;
      j["top1_agreement"] = r.top1_agreement;
    }
    j["kv_bytes"] = r.kv_bytes;
    j["kv_fp16_bytes"] = r.kv_fp16_bytes;
    j["kv_peak_held_bytes"] = r.kv_peak_held_bytes;
    j["seconds"] = r.seconds;
    j["tokens_per_s"] = r.tokens_per_second;
    j["threads"] = a.threads;
    j["peak_rss_mib"] = peak_rss_mib();
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("perplexity: {:.4f} +/- {:.4f}  ({} chunks of {} tokens, {} scored, kv {})\n",
             r.perplexity, r.perplexity_error, r.chunks, r.context, grouped(r.scored_tokens), kv);
  if (r.compared) {
    fmt::print("vs baseline: KL {:.6f} +/- {:.6f} nats/token, top-1 agreement {:.2f}%\n", r.kl_mean,
               r.kl_error, 100.0 * r.top1_agreement);
  }
  fmt::print("kv cache:   {} (one chunk)\n", kv_summary(r.kv_bytes, r.kv_fp16_bytes));
  if (r.kv_peak_held_bytes)
    fmt::print("kv memory:  {} B at most held by the caches' buffers\n", grouped(r.kv_peak_held_bytes));
  fmt::print("speed:      {:.1f} tokens/s over {:.2f} s, {} thread{}; {:.1f} MiB peak resident\n",
             r.tokens_per_second, r.seconds, a.threads, a.threads == 1 ? "" : "s", peak_rss_mib());
  if (!a.options.save_base.empty()) fmt::print("baseline saved to {}\n", a.options.save_base);
}

}  // namespace

Command add_perplexity_command(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file as llama.cpp computes it (chunks of --ctx tokens, "
                    "second half of each scored), with any KV-cache method");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->file, "text file")->required();
  cmd->add_option("-c,--ctx", a->options.context, "tokens per chunk")->capture_default_str()->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", a->options.chunks, "chunks to evaluate (0: all the text holds)")->capture_default_str();
  cmd->add_option("--kv", a->options.kv_spec, "KV-cache method spec (see `veloxquant methods`)")->capture_default_str();
  cmd->add_option("--save-kl-base", a->options.save_base,
                  "save every scored position's log-probabilities (f32, vocab per position) here");
  cmd->add_option("--kl-base", a->options.kl_base,
                  "report KL divergence and top-1 agreement against a file from --save-kl-base");
  add_threads_option(cmd, a->threads);
  add_device_options(cmd, a->options.device, a->options.gpu_weights);
  cmd->add_flag("--json", a->json, "print the final numbers as one JSON object");
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
