// Perplexity over a text as llama.cpp's llama-perplexity computes it, so numbers compare with
// llama.cpp's: the text is tokenized once (with BOS), cut into non-overlapping chunks of
// `context` tokens, each chunk starts with BOS in place of its first token, and only the second
// half of each chunk is scored (every scored token sees at least context/2 tokens before it).
// It can also save the baseline's log-probabilities and compare a compressed cache against them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "veloxquant/model.h"

namespace veloxquant {

struct PerplexityOptions {
  size_t context = 512;
  size_t chunks = 0;              // 0: as many as the text holds
  std::string kv_spec = "fp16";
  Device device = Device::Cpu;
  GpuWeights gpu_weights = GpuWeights::F16;
  std::string save_base;          // write every scored position's log-probabilities here
  std::string kl_base;            // compare against a file written by save_base
  // Called after each chunk with (chunks done, chunks total, running perplexity).
  std::function<void(size_t, size_t, double)> progress;
};

struct PerplexityResult {
  double perplexity = 0;
  double perplexity_error = 0;  // one standard error, from the per-token NLL spread
  double mean_nll = 0;
  size_t chunks = 0;
  size_t context = 0;
  size_t text_tokens = 0;
  size_t scored_tokens = 0;
  double seconds = 0;
  double tokens_per_second = 0;  // forward-pass tokens (all of each chunk) per second
  size_t kv_bytes = 0;           // exact cache bytes after one full chunk: key_bytes + value_bytes
  size_t key_bytes = 0;
  size_t value_bytes = 0;
  size_t kv_fp16_bytes = 0;
  // The most the caches took from the allocator during a chunk (Session::kv_peak_held_bytes),
  // over the chunks; 0 on the GPU.
  size_t kv_peak_held_bytes = 0;
  // Against kl_base: mean KL(base || this) per scored token (nats), its standard error, and
  // how often both agree on the most likely token.
  bool compared = false;
  double kl_mean = 0;
  double kl_error = 0;
  double top1_agreement = 0;
};

// Throws Error when the text has fewer than 2 * context tokens (one chunk needs context + 1
// tokens, llama.cpp asks for two), when context < 4, and when a kl_base file is missing, corrupt
// or was written for another model, text, context or chunk count.
PerplexityResult compute_perplexity(const Model& model, std::string_view text,
                                    const PerplexityOptions& options);

}  // namespace veloxquant
