// What `veloxquant eval` measured for each KV-cache method, and the decisions drawn from it: the
// Pareto front of cache bytes against perplexity, the recommendation under a quality guardrail,
// and the results as JSON and as a markdown table. Pure functions of the measurements, so the
// rules are tested without running a model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/long_tasks.h"
#include "eval/needle_recall.h"
#include "veloxquant/eval.h"
#include "veloxquant/observer.h"

namespace veloxquant {

// One method's measurements. Bytes are those of one perplexity chunk's caches (all layers).
struct MethodEval {
  std::string spec;  // canonical spec text
  size_t key_bytes = 0, value_bytes = 0, fp16_bytes = 0;
  double perplexity = 0, perplexity_error = 0;
  // Against the fp16 baseline's logits on the same chunks (the baseline itself: 0, 0, 1).
  double perplexity_delta_pct = 0;
  double kl_mean = 0, kl_error = 0;
  double top1_agreement = 1;
  std::vector<NeedleCell> retrieval;  // lengths in order, each with every depth in order
  double retrieval_mean = 0;
  std::vector<LongTaskCell> tasks;  // tasks in order, each with every length in order
  double tasks_mean = 0;
  double prefill_tokens_per_s = 0, decode_tokens_per_s = 0;
  double peak_rss_mib = 0;  // the process's peak resident memory while this method ran
  size_t kv_peak_held_bytes = 0;  // the most the caches' buffers held during a perplexity chunk
  double seconds = 0;       // wall time of all of this method's measurements
  size_t chunks = 0, scored_tokens = 0;  // what the perplexity covered
  // What the caches did over the observed prompt (eval --observe), per layer and KV head.
  std::vector<LayerObservation> observations;

  size_t bytes() const { return key_bytes + value_bytes; }
  double compression_ratio() const;  // fp16 bytes / stored bytes
  double bits_per_element() const;   // stored bits per key or value element
};

// A spec eval leaves out on a device, and why.
struct DeviceSkip {
  std::string spec, reason;
};

// How the measurements were taken, recorded beside them.
struct EvalSetup {
  std::string model, text;
  size_t context = 0, chunks = 0, scored_tokens = 0;
  std::vector<size_t> retrieval_lengths;
  std::vector<double> retrieval_depths;
  size_t needle_tokens = 0, trials = 0;
  std::vector<std::string> tasks;
  std::vector<size_t> task_lengths;
  size_t task_samples = 0;
  uint64_t seed = 0;
  size_t decode_prompt = 0, decode_tokens = 0;
  size_t observed_tokens = 0;  // 0: not observed
  int threads = 1;
  std::string device = "cpu";       // "cpu", or "cuda" with its weights: "cuda (f16 weights)"
  std::vector<DeviceSkip> skipped;  // what "all" named that the device does not run
};


// Why `row` fails the guardrail against `baseline`, one clause per broken limit ("perplexity
// +3.10 % > 1.00 %; KL 0.0700 > 0.0500"); empty when it passes.
std::string guardrail_failures(const MethodEval& row, const MethodEval& baseline, const Guardrail& g);

// rows[0] is the baseline. The index of the non-baseline row with the fewest cache bytes that
// passes the guardrail (ties: lower perplexity); none when no row passes.
std::optional<size_t> recommend(const std::vector<MethodEval>& rows, const Guardrail& g);

// The rows no other row dominates on (bytes, perplexity): nothing else is at most as large and
// at most as perplexed, and strictly better in one of the two.
std::vector<bool> pareto_front(const std::vector<MethodEval>& rows);

// results.json: {"setup": {...}, "methods": [{... "pareto": bool, "observations": {"layers": [...]}
// when observed}], "recommendation": ...}; the
// recommendation is present (an object, or null when nothing passes) only when a guardrail is
// given.
std::string results_json(const EvalSetup& setup, const std::vector<MethodEval>& rows,
                         const std::optional<Guardrail>& guardrail);

// The markdown table of every row, Pareto-front rows marked, then one line per spec with its
// retrieval cells, and one with its task scores when tasks ran.
std::string results_markdown(const EvalSetup& setup, const std::vector<MethodEval>& rows);

}  // namespace veloxquant
