#include "eval/method_eval.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include "veloxquant/cache.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"
#include "veloxquant/observer.h"
#include "veloxquant/perplexity.h"

namespace veloxquant {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// BOS and the first haystack tokens, `tokens` in all.
std::vector<int32_t> prompt_of(const Model& model, std::span<const int32_t> haystack, size_t tokens) {
  std::vector<int32_t> prompt;
  if (model.tokenizer().bos() >= 0) prompt.push_back(model.tokenizer().bos());
  if (haystack.size() + prompt.size() < tokens) {
    throw Error("eval: the text has " + std::to_string(haystack.size()) + " tokens; a prompt of " +
                std::to_string(tokens) + " needs more");
  }
  prompt.insert(prompt.end(), haystack.begin(),
                haystack.begin() + static_cast<std::ptrdiff_t>(tokens - prompt.size()));
  return prompt;
}

// The caches observed over one prompt, evaluated as a prompt is (micro-batches, eviction after each).
std::vector<LayerObservation> observe(const Model& model, std::span<const int32_t> haystack,
                                      const std::string& spec, size_t tokens) {
  const ModelConfig& c = model.config();
  CacheObserver observer(c.layers, c.kv_heads, c.heads, c.head_dim, c.rope);
  Session session(model, SessionOptions{spec, tokens});
  session.set_observer(&observer);
  session.eval(prompt_of(model, haystack, tokens), Logits::None);
  return observer.report(session.caches());
}

// Tokens per second of single-token decode steps: a prompt of the first context - decode_tokens
// haystack tokens, then decode_tokens steps each fed the haystack's next token (the work of
// sampling a token, without a sampler deciding when to stop).
double decode_tokens_per_s(const Model& model, std::span<const int32_t> haystack, const std::string& spec,
                           size_t context, size_t decode_tokens, Device device, GpuWeights weights) {
  if (decode_tokens == 0) return 0;
  if (decode_tokens >= context) {
    throw Error("eval: " + std::to_string(decode_tokens) + " decode tokens leave no prompt in a context of " +
                std::to_string(context) + "; expected fewer decode tokens than the context");
  }
  const size_t prompt = context - decode_tokens;
  Session session(model, SessionOptions{spec, context, device, weights});
  const std::vector<int32_t> tokens = prompt_of(model, haystack, context);
  session.eval(std::span(tokens).first(prompt), Logits::None);
  const auto start = Clock::now();
  for (size_t i = 0; i < decode_tokens; ++i) {
    const int32_t next = tokens[prompt + i];
    session.eval(std::span(&next, 1), Logits::Last);
  }
  return static_cast<double>(decode_tokens) / std::max(seconds_since(start), 1e-9);
}

}  // namespace

std::vector<std::string> expand_eval_specs(const std::vector<std::string>& args, size_t policy_budget) {
  std::vector<std::string> named;
  for (const std::string& arg : args) {
    if (arg != "all") {
      named.push_back(arg);
      continue;
    }
    // A calibrated method needs its artifact (artifacts=DIR from `calibrate`), named explicitly.
    for (const MethodInfo& m : registered_methods())
      if (!m.calibrated()) named.push_back(m.name);
    for (const MethodInfo& p : registered_policies())
      named.push_back(p.name + ":budget=" + std::to_string(policy_budget));
  }
  std::vector<std::string> specs{parse_spec("fp16").to_string()};
  std::set<std::string> seen(specs.begin(), specs.end());
  for (const std::string& text : named) {
    std::string spec = parse_spec(text).to_string();
    if (seen.insert(spec).second) specs.push_back(std::move(spec));
  }
  return specs;
}

void check_specs_fit(const std::vector<std::string>& specs, const Model& model) {
  const ModelConfig& c = model.config();
  for (const std::string& spec : specs) make_layer_caches(parse_spec(spec), cache_shapes(c));
}

std::vector<DeviceSkip> drop_specs_off_cuda(std::vector<std::string>& specs,
                                            const std::vector<std::string>& args, const Model& model) {
  // The fp16 baseline is always needed: the GPU refusing it is an error too.
  std::set<std::string> named{parse_spec("fp16").to_string()};
  for (const std::string& arg : args)
    if (arg != "all") named.insert(parse_spec(arg).to_string());
  const std::vector<LayerShape> shapes = cache_shapes(model.config());
  std::vector<DeviceSkip> skipped;
  std::vector<std::string> kept;
  for (const std::string& spec : specs) {
    const Spec parsed = parse_spec(spec);
    std::string reason;
    for (const LayerShape& shape : shapes) {
      if (const cuda::Support s = cuda::supports(parsed, shape); !s) {
        reason = s.reason;
        break;
      }
    }
    if (reason.empty()) {
      kept.push_back(spec);
    } else if (named.contains(spec)) {
      throw SpecError("eval --device cuda: " + reason);
    } else {
      skipped.push_back({spec, reason});
    }
  }
  specs = std::move(kept);
  return skipped;
}

MethodEval evaluate_method(const Model& model, std::string_view text, std::span<const int32_t> haystack,
                           const std::string& spec, const MethodEval* baseline, const MethodEvalOptions& o,
                           const std::function<void(const std::string&)>& stage) {
  const auto start = Clock::now();
  reset_peak_rss();
  MethodEval r;
  r.spec = spec;

  stage("perplexity");
  PerplexityOptions po;
  po.context = o.context;
  po.chunks = o.chunks;
  po.kv_spec = spec;
  po.device = o.device;
  po.gpu_weights = o.gpu_weights;
  (baseline ? po.kl_base : po.save_base) = o.baseline_logprobs;
  const PerplexityResult p = compute_perplexity(model, text, po);
  r.key_bytes = p.key_bytes;
  r.value_bytes = p.value_bytes;
  r.fp16_bytes = p.kv_fp16_bytes;
  r.kv_peak_held_bytes = p.kv_peak_held_bytes;
  r.perplexity = p.perplexity;
  r.perplexity_error = p.perplexity_error;
  r.prefill_tokens_per_s = p.tokens_per_second;
  r.chunks = p.chunks;
  r.scored_tokens = p.scored_tokens;
  if (baseline) {
    r.perplexity_delta_pct = 100.0 * (p.perplexity / baseline->perplexity - 1.0);
    r.kl_mean = p.kl_mean;
    r.kl_error = p.kl_error;
    r.top1_agreement = p.top1_agreement;
  }

  if (!o.needle.lengths.empty()) {
    stage("retrieval");
    NeedleOptions no = o.needle;
    no.kv_spec = spec;
    no.device = o.device;
    no.gpu_weights = o.gpu_weights;
    no.progress = {};
    const NeedleResult n = needle_recall(model, haystack, no);
    r.retrieval = n.cells;
    r.retrieval_mean = n.mean_recall;
  }

  if (!o.tasks.tasks.empty()) {
    stage("tasks");
    LongTaskOptions to = o.tasks;
    to.kv_spec = spec;
    to.device = o.device;
    to.gpu_weights = o.gpu_weights;
    to.progress = {};
    const LongTaskResult t = run_long_tasks(model, text, haystack, to);
    r.tasks = t.cells;
    r.tasks_mean = t.mean_score;
  }

  stage("decode");
  r.decode_tokens_per_s = decode_tokens_per_s(model, haystack, spec, o.context, o.decode_tokens, o.device,
                                              o.gpu_weights);
  if (o.observe_tokens) {
    stage("observe");
    r.observations = observe(model, haystack, spec, o.observe_tokens);
  }
  r.peak_rss_mib = peak_rss_mib();
  r.seconds = seconds_since(start);
  return r;
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      double kib = 0;
      fields >> kib;
      return kib / 1024.0;
    }
  }
  throw Error("eval: /proc/self/status has no VmHWM line; peak memory needs Linux");
}

}  // namespace veloxquant
