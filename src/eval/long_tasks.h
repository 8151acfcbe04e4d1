// Long-context tasks in the manner of RULER (Hsieh et al., "RULER: What's the Real Context Size of
// Your Long-Context Language Models?", 2024), built from the evaluation text: the model reads a
// prompt of a given length, answers greedily, and the answer is scored by the fraction of the
// expected strings it contains (RULER's string_match_all). A compressed cache that loses what the
// prompt said loses the score; unlike perplexity, the answer must be retrieved, often from
// several places at once.
//
// niah_multikey     four "special magic number" needles under four keys; asked for one key's.
// niah_multivalue   four needles under one key; asked for all four numbers.
// variable_tracking a chain VAR A = 12345, VAR B = VAR A, ... (4 hops) hidden in the text; asked
//                   which variables hold the value.
// common_words      a numbered list of words, ten of them 30 times each and the rest 3 times;
//                   asked for the ten most common.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/model.h"

namespace veloxquant {

// The task names above, in that order.
const std::vector<std::string>& long_task_names();

// One prompt and what its answer must contain.
struct LongTaskSample {
  std::vector<int32_t> prompt;       // BOS (when the vocabulary has one) through the answer's lead-in
  std::vector<std::string> answers;  // each expected in the generated text
  size_t max_new_tokens = 0;         // prompt.size() + max_new_tokens == the task length
};

// Words the tasks draw keys and list entries from: the distinct lowercase alphabetic words of 4 to
// 10 letters in `text`, sorted. Throws Error when the text has fewer than 64.
std::vector<std::string> task_words(std::string_view text);

// Builds sample `index` of `task` at `length` tokens (prompt plus answer) from `filler` (text
// tokens without BOS, read from an offset that depends on the index) and `words`; the same
// (task, length, index, seed) always gives the same sample. Throws Error naming the value for an
// unknown task, or a length too short for the task's fixed text or longer than the filler holds.
LongTaskSample build_long_task(const Model& model, const std::string& task, size_t length, size_t index,
                               uint64_t seed, std::span<const int32_t> filler,
                               const std::vector<std::string>& words);

// Throws Error naming the value unless every task is known, every length fits `context` tokens
// and samples >= 1; run_long_tasks checks this, and eval before its first measurement.
void check_long_tasks(const std::vector<std::string>& tasks, const std::vector<size_t>& lengths,
                      size_t samples, size_t context);

// The fraction of `answers` found in `generated`, ignoring case (RULER's string_match_all).
double score_long_task(std::string_view generated, const std::vector<std::string>& answers);

struct LongTaskOptions {
  std::string kv_spec = "fp16";
  std::vector<std::string> tasks;  // names from long_task_names()
  std::vector<size_t> lengths;     // tokens per sample, prompt and answer
  size_t samples = 4;              // per task and length
  uint64_t seed = 1;
  Device device = Device::Cpu;  // where the samples run
  GpuWeights gpu_weights = GpuWeights::F16;
  std::function<void(size_t done, size_t total)> progress;
};

struct LongTaskCell {
  std::string task;
  size_t length = 0;
  size_t samples = 0;
  double score = 0;  // mean over the samples
};

struct LongTaskResult {
  std::vector<LongTaskCell> cells;  // tasks in the given order, each with every length in order
  double mean_score = 0;            // over all cells
};

// Runs every (task, length, sample) on a Session with kv_spec: the prompt in one eval (micro-
// batched as any prompt, so an eviction policy selects after it), then up to max_new_tokens
// greedy tokens, stopping at an end-of-generation token. Throws Error as build_long_task does, or
// when a length exceeds the model's context.
LongTaskResult run_long_tasks(const Model& model, std::string_view text, std::span<const int32_t> filler,
                              const LongTaskOptions& options);

}  // namespace veloxquant
