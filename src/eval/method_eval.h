// Runs `veloxquant eval`'s measurements of one KV-cache method on a model: cache bytes and
// perplexity (llama.cpp's chunking, with KL divergence and top-1 agreement against the fp16
// baseline's saved log-probabilities), needle retrieval by length and depth, long-context tasks,
// decode speed and peak memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/eval_report.h"
#include "veloxquant/eval.h"
#include "veloxquant/model.h"

namespace veloxquant {

struct MethodEvalOptions {
  size_t context = 2048;  // tokens per perplexity chunk
  size_t chunks = 8;
  NeedleOptions needle;   // kv_spec and progress are set per method
  LongTaskOptions tasks;  // likewise; no tasks: none run
  size_t decode_tokens = 64;  // decode steps timed after a prompt of context - decode_tokens
  size_t observe_tokens = 0;  // > 0: observe the caches over a prompt of this many text tokens
  // The fp16 baseline writes its log-probabilities here; every other method is compared with them.
  std::string baseline_logprobs;
  Device device = Device::Cpu;  // where perplexity, retrieval, tasks and decode run
  GpuWeights gpu_weights = GpuWeights::F16;
};

// The specs `eval --kv` names, canonical and without repeats, the fp16 baseline first (added when
// missing). "all" stands for every registered quantizer that needs no calibration (a calibrated
// one is named with its artifacts=DIR) at its defaults, then every eviction
// policy alone (keeping its tokens in fp16) at its defaults but a budget of `policy_budget`
// tokens: what a policy keeps decides retrieval, so the budget follows the context evaluated
// (eval passes half of it) rather than a fixed default that a short context never reaches.
// Throws SpecError naming a bad spec.
std::vector<std::string> expand_eval_specs(const std::vector<std::string>& args, size_t policy_budget);

// Builds every spec's caches for `model`, so that a spec its codecs refuse for this model's shape
// (kivi:kbits=3, a head_dim a method cannot take) fails before any measurement. Throws SpecError.
void check_specs_fit(const std::vector<std::string>& specs, const Model& model);

// For Device::Cuda: removes from `specs` the ones the CUDA backend does not hold on every layer of
// `model` (cuda::supports) and returns them with the reason. A spec that `args` names itself,
// rather than through "all", or the fp16 baseline, is not left out: SpecError names it and the
// reason.
std::vector<DeviceSkip> drop_specs_off_cuda(std::vector<std::string>& specs,
                                            const std::vector<std::string>& args, const Model& model);

// Measures `spec`. `baseline` is null for the fp16 run itself, which writes the baseline file;
// every later run is compared with it and with that file. `haystack` is the text's tokens without
// BOS (retrieval, decode and observation read it). `stage` is called with "perplexity",
// "retrieval", "tasks", "decode" and "observe" as each begins.
MethodEval evaluate_method(const Model& model, std::string_view text, std::span<const int32_t> haystack,
                           const std::string& spec, const MethodEval* baseline, const MethodEvalOptions& options,
                           const std::function<void(const std::string&)>& stage);

// Every measurement of `veloxquant eval` (eval.h): the specs checked before anything runs, then
// the baseline and each spec measured in order. `progress` as in evaluate_methods_json().
struct EvalRun {
  EvalSetup setup;
  std::vector<MethodEval> rows;  // rows[0]: fp16
};
EvalRun run_eval(const Model& model, std::string_view text, const EvalOptions& options,
                 const std::function<void(const std::string&)>& progress);

// "4m05s"
std::string minutes(double seconds);

// Peak resident memory of this process since the last reset_peak_rss() (Linux: VmHWM, which
// writing "5" to /proc/self/clear_refs resets); returns false when the kernel refuses the reset,
// and the peak then covers the whole process so far.
bool reset_peak_rss();
double peak_rss_mib();

}  // namespace veloxquant
