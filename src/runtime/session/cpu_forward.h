// The forward pass of a decoder on the CPU over the rows of one step, which may belong to several
// sequences at different positions (a lockstep batch, or a server's sequences, each with its own
// prompt chunk or next token): every projection runs on all rows at once, so the weights are read
// once per step, and each sequence appends to and attends through its own caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/model.h"

namespace veloxquant {
class CacheObserver;
}

namespace veloxquant::runtime {

// One sequence's share of a step: rows [first_row, first_row + n) are its next n tokens, at
// positions [position, position + n), and `caches` its caches, one per layer that stores keys and
// values (ModelConfig::cache_layers).
struct ForwardSegment {
  KVCache* caches = nullptr;
  size_t first_row = 0, n = 0;
  int64_t position = 0;
  // squeeze: filled with each cache layer's mean cosine between the hidden state before and after its
  // attention block over the segment's rows; null when not measured.
  std::vector<double>* importance = nullptr;
};

// Runs `tokens` (one per row) through every layer with each layer's RoPE in `ropes`, then writes
// the logits of the rows in `logit_rows` to `logits` ([logit_rows.size(), vocab], in that order).
// The observer (null: none) sees every layer of a step with a single segment. Does not call the
// caches' finish_step: the caller ends the step.
void cpu_forward(const Model& model, std::span<const RopeParams> ropes, std::span<const int32_t> tokens,
                 std::span<const ForwardSegment> segments, std::span<const size_t> logit_rows, float* logits,
                 CacheObserver* observer = nullptr);

}  // namespace veloxquant::runtime
