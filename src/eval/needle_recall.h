// Needle recall: does a compressed KV cache keep what it saw far back in the context? A run of
// random tokens (the needle) is planted in ordinary text and repeated at the end; a model with
// induction heads predicts the repeat by copying from the first occurrence, which it can only do
// while the cache still holds that occurrence faithfully.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "veloxquant/model.h"

namespace veloxquant {

struct NeedleOptions {
  std::string kv_spec = "fp16";
  std::vector<size_t> lengths{1024};  // tokens per sequence, BOS and both needle copies included
  // Where the first copy sits in the text between BOS and the final copy: 0 right after BOS,
  // 1 right before the final copy.
  std::vector<double> depths{0.1, 0.5, 0.9};
  size_t needle_tokens = 32;
  size_t trials = 2;  // sequences per (length, depth), each from another stretch of the haystack
  uint64_t seed = 1;
  // The control: false leaves the first copy out (text takes its place, and every depth gives
  // the same sequence), so the final copy can only be guessed: recall without any memory of it.
  bool plant = true;
  Device device = Device::Cpu;  // where the sequences run
  GpuWeights gpu_weights = GpuWeights::F16;
  // Called after each sequence with (sequences done, sequences total).
  std::function<void(size_t done, size_t total)> progress;
};

struct NeedleCell {
  size_t length = 0;
  double depth = 0;
  double recall = 0;  // fraction of scored needle tokens that were the argmax prediction
  size_t scored = 0;  // (needle_tokens - 1) per trial
  size_t kv_bytes = 0;  // the caches after the cell's last sequence
  size_t kv_fp16_bytes = 0;
};

struct NeedleResult {
  std::vector<NeedleCell> cells;  // lengths in the given order, each with every depth in order
  double mean_recall = 0;         // over all cells
};

// Each sequence is BOS (when the vocabulary has one), haystack text with the needle inserted at
// the depth, then the needle again, exactly `length` tokens, on a Session with kv_spec: one
// Session::eval of the prompt through the final copy's first token, then one eval per token of
// the copy's rest, as generation reads it (teacher-forced). The needle's tokens are
// uniform over the vocabulary's printable ids (no control or end-of-generation tokens), drawn from
// the seed, the length and the trial, so every depth of a trial hides the same needle in the same
// text. The final copy's first token cannot be predicted; the other needle_tokens - 1 are scored,
// each from the tokens before it.
// Throws Error naming the value when a length cannot hold BOS, the needles and a few text tokens
// or exceeds the model's context, a depth is outside [0, 1], needle_tokens < 2, trials == 0, a
// list is empty or the haystack is shorter than the longest sequence needs.
NeedleResult needle_recall(const Model& model, std::span<const int32_t> haystack_tokens,
                           const NeedleOptions& options);

// One sequence as needle_recall builds it: BOS (when bos >= 0), `text` with the needle inserted
// after round(depth * text.size()) of its tokens (unless `plant` is false), then the needle.
std::vector<int32_t> needle_sequence(int32_t bos, std::span<const int32_t> text,
                                     std::span<const int32_t> needle, double depth, bool plant);

}  // namespace veloxquant
