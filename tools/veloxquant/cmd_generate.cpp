// `veloxquant generate`: continue a prompt with a GGUF model, attention running through the
// chosen KV-cache method; then report speed, exact cache bytes and peak memory.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/generate.h"
#include "veloxquant/method.h"
#include "veloxquant/model.h"
#include "veloxquant/observer.h"
#include "veloxquant/sampler.h"

namespace veloxquant::cli {
namespace {

struct GenerateArgs {
  std::string model, prompt, kv = "fp16";
  size_t tokens = 128, context = 0;
  SamplerOptions sampling;
  bool seed_given = false;
  int threads = 1;
  bool json = false, ignore_eos = false;
  std::string save_session, load_session, observe;
  bool kv_given = false;
  Device device = Device::Cpu;
  GpuWeights gpu_weights = GpuWeights::F16;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void run(const GenerateArgs& a) {
  set_threads(a.threads);
  SamplerOptions sampling = a.sampling;
  if (!a.seed_given) sampling.seed = std::random_device{}();
  const Model model = Model::load(a.model);
  if (!a.observe.empty() && !a.load_session.empty()) {
    throw Error("--observe cannot follow a --load-session: the observer must see every token from the first");
  }
  PromptSession p = open_prompt(model, a.prompt, PromptOptions{a.kv_given ? std::optional(a.kv) : std::nullopt,
                                                               a.context, a.load_session, a.device, a.gpu_weights});
  Session& session = p.session;
  if (session.device_weight_bytes() > 0) {
    // Never silent: what decoding the stored types once at load costs in GPU memory.
    fmt::print(stderr, "weights:   {:.1f} MiB as stored in the file, {:.1f} MiB as {} on cuda (decoded once at load)\n",
               static_cast<double>(model.weight_bytes()) / (1 << 20),
               static_cast<double>(session.device_weight_bytes()) / (1 << 20),
               a.gpu_weights == GpuWeights::F32 ? "f32" : "f16");
  }
  const std::string kv = session.spec().to_string();
  const std::vector<int32_t>& prompt = p.prompt;
  const size_t reused = p.reused;
  std::optional<CacheObserver> observer;
  if (!a.observe.empty()) {
    const ModelConfig& c = model.config();
    observer.emplace(c.layers, c.kv_heads, c.heads, c.head_dim, c.rope);
    session.set_observer(&*observer);
  }
  Sampler sampler(sampling);
  const Tokenizer& tok = model.tokenizer();
  for (int32_t t : prompt) sampler.accept(t);

  if (!a.json) {
    fmt::print("{}", p.continued_as_saved ? tok.decode(prompt) : a.prompt);
    std::fflush(stdout);
  }
  auto t0 = std::chrono::steady_clock::now();
  const double save_s = evaluate_prompt(p, a.save_session);
  const double prompt_s = seconds_since(t0) - save_s;
  std::vector<float> logits = std::move(p.logits);
  std::string text, pending;
  t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> generated = generate(
      session, sampler, std::move(logits), GenerateOptions{a.tokens, a.ignore_eos}, [&](int32_t next) {
        pending += tok.token_to_piece(next);
        const size_t ready = complete_utf8(pending);
        if (!a.json) fmt::print("{}", pending.substr(0, ready));
        std::fflush(stdout);
        text += pending.substr(0, ready);
        pending.erase(0, ready);
      });
  text += pending;
  const double gen_s = seconds_since(t0);
  const size_t evaluated = prompt.size() - reused;
  const double prompt_tps = static_cast<double>(evaluated) / std::max(prompt_s, 1e-9);
  if (observer) write_text(a.observe, observations_json(observer->report(session.caches())));
  const double gen_tps = static_cast<double>(generated.size()) / std::max(gen_s, 1e-9);
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["kv"] = kv;
    j["device"] = a.device == Device::Cuda ? "cuda" : "cpu";
    if (a.device == Device::Cuda) j["gpu_weights"] = a.gpu_weights == GpuWeights::F32 ? "f32" : "f16";
    j["seed"] = sampling.seed;
    j["threads"] = a.threads;
    j["prompt_tokens"] = prompt.size();
    j["session_tokens_reused"] = reused;
    j["generated_tokens"] = generated.size();
    j["text"] = text;
    j["prompt_tokens_per_s"] = prompt_tps;
    j["generated_tokens_per_s"] = gen_tps;
    j["kv_bytes"] = session.kv_bytes();
    j["kv_fp16_bytes"] = session.kv_fp16_bytes();
    j["kv_peak_held_bytes"] = session.kv_peak_held_bytes();
    j["peak_rss_mib"] = peak_rss_mib();
    // A sampled byte-level text need not be valid UTF-8 (a token may end mid-character): invalid
    // bytes become U+FFFD rather than failing the whole run.
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  fmt::print("{}\n", pending);
  if (!a.load_session.empty()) {
    fmt::print(stderr, "\nsession:   {} tokens restored from {} in {:.1f} ms", reused,
               a.load_session, p.load_seconds * 1e3);
  }
  fmt::print(stderr, "\nprompt:    {} tokens in {:.1f} ms ({:.1f} tokens/s)\n", evaluated,
             prompt_s * 1e3, prompt_tps);
  if (!a.save_session.empty()) {
    fmt::print(stderr, "session:   {} tokens saved to {} in {:.1f} ms\n", prompt.size(),
               a.save_session, save_s * 1e3);
  }
  fmt::print(stderr, "generated: {} tokens in {:.1f} ms ({:.1f} tokens/s), {} thread{}, seed {}\n",
             generated.size(), gen_s * 1e3, gen_tps, a.threads, a.threads == 1 ? "" : "s",
             sampling.seed);
  fmt::print(stderr, "kv cache:  {}: {}\n", kv,
             kv_summary(session.kv_bytes(), session.kv_fp16_bytes()));
  if (const size_t held = session.kv_peak_held_bytes())
    fmt::print(stderr, "kv memory: {} B at most held by the caches' buffers\n", grouped(held));
  fmt::print(stderr, "memory:    {:.1f} MiB peak resident\n", peak_rss_mib());
  if (observer) fmt::print(stderr, "observed:  per layer and KV head in {}\n", a.observe);
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a GGUF model through a KV-cache method");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", a->prompt, "text to continue (BOS is added)");
  cmd->add_option("-n,--tokens", a->tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--kv", a->kv, "KV-cache method spec (see `veloxquant methods`; with --load-session: the file's)")
      ->capture_default_str()
      ->each([a](const std::string&) { a->kv_given = true; });
  cmd->add_option("-c,--ctx", a->context, "context size in tokens (0: the model's)")->capture_default_str();
  add_device_options(cmd, a->device, a->gpu_weights);
  cmd->add_option("--temp", a->sampling.temperature, "temperature; 0 is greedy")->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "keep the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--top-p", a->sampling.top_p, "nucleus sampling mass")->capture_default_str();
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "penalty for recent tokens (1: off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", a->sampling.repeat_last_n, "how many recent tokens the penalty sees")->capture_default_str();
  cmd->add_option("-s,--seed", a->sampling.seed, "sampling seed (default: random, printed)")
      ->each([a](const std::string&) { a->seed_given = true; });
  add_threads_option(cmd, a->threads);
  cmd->add_flag("--json", a->json, "print one JSON object (text and statistics) instead");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "keep generating past end-of-text tokens (long-run tests)");
  cmd->add_option("--save-session", a->save_session,
                  "save the KV cache and tokens after the prompt to FILE (docs/sessions.md)");
  cmd->add_option("--load-session", a->load_session,
                  "restore a saved session; -p must start with its tokens (omit -p: continue it)");
  cmd->add_option("--observe", a->observe,
                  "write what the caches did, per layer and KV head, as JSON to FILE: key/value "
                  "reconstruction and attention-output errors against exact fp32, encode and attend "
                  "time, bytes, key norms, attention-sink mass (costs an exact attention per step)");
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
