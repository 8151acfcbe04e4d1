// `veloxquant eval` as a library call (the CLI and Model.eval in Python share it): the fp16
// baseline and every KV-cache method measured on one model and text: exact key and value bytes,
// perplexity with KL divergence and top-1 agreement against fp16, needle retrieval by length and
// depth, prefill and decode speed, peak memory and, on request, per layer and KV head observations.
// The result is results.json's text; docs/results/README.md describes its fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/model.h"

namespace veloxquant {

struct EvalOptions {
  // Specs; "all": every registered quantizer that needs no calibration at its defaults (name a
  // calibrated one with its artifacts=DIR), then every eviction policy alone (fp16 storage) at a
  // budget of context/2. fp16 is always measured first.
  std::vector<std::string> kv{"all"};
  size_t context = 0;  // tokens per perplexity chunk; 0: 2048, or the model's context when shorter
  size_t chunks = 8;
  std::vector<size_t> retrieval;  // needle sequence lengths; empty: context/2 and context
  std::vector<double> depths{0.1, 0.5, 0.9};
  size_t needle_tokens = 32, trials = 2;
  uint64_t seed = 1;
  size_t decode_tokens = 64;  // decode steps timed after a prompt filling the rest of the context
  bool observe = false;       // observe each method's caches over a prompt of context/2 tokens
  // Long-context tasks in RULER's manner (niah_multikey, niah_multivalue, variable_tracking,
  // common_words), each scored at every task length over task_samples samples; none by default.
  std::vector<std::string> tasks;
  std::vector<size_t> task_lengths;  // empty: the context
  size_t task_samples = 4;
  std::string model_name, text_name;  // recorded in the results' setup
  // Where every measurement runs. On Device::Cuda, "all" keeps the methods the CUDA backend holds
  // on every layer of the model (the others are listed in the setup with the reason), a spec
  // named on its own that it does not hold is refused, and observe is refused (it reads host-side
  // caches).
  Device device = Device::Cpu;
  GpuWeights gpu_weights = GpuWeights::F16;
};

// The quality a recommended method must keep, relative to the fp16 baseline.
struct Guardrail {
  double max_delta_pct = 1.0;      // perplexity increase, percent
  double max_kl = 0.05;            // mean KL divergence, nats per token
  double recall_tolerance = 0.02;  // mean retrieval may fall this far (absolute) below fp16's
};

// Runs every measurement and returns results.json's text; with a guardrail it holds the
// recommendation (the smallest cache that passes, or null). `progress` gets one line per stage
// ("[3/23] kivi: retrieval  elapsed 1m02s  ETA 9m40s"). Throws SpecError or Error naming a bad
// spec or setting before any measurement.
std::string evaluate_methods_json(const Model& model, std::string_view text, const EvalOptions& options,
                                  const std::optional<Guardrail>& guardrail,
                                  const std::function<void(const std::string&)>& progress = {});

}  // namespace veloxquant
