// Picks the next token from logits: repetition penalty, top-k, top-p, temperature, then a seeded
// draw — the order llama.cpp's default sampler chain applies them. Temperature 0 is greedy.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "veloxquant/error.h"

namespace veloxquant {

struct SamplerOptions {
  float temperature = 0.8f;     // 0: always the most likely token
  int top_k = 40;               // keep the k most likely; 0 keeps all
  float top_p = 0.95f;          // keep the smallest set whose probability reaches p; 1 keeps all
  float repeat_penalty = 1.0f;  // > 1 discourages tokens seen in the last repeat_last_n
  size_t repeat_last_n = 64;
  uint64_t seed = 0;
};

// Throws Error naming the option when a value is out of range (temperature < 0, top_p not in
// (0, 1], repeat_penalty <= 0, top_k < 0).
inline void check_sampler_options(const SamplerOptions& o) {
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature))
    throw Error("temperature " + std::to_string(o.temperature) + " is invalid; expected >= 0");
  if (o.top_k < 0) throw Error("top_k " + std::to_string(o.top_k) + " is invalid; expected >= 0");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f))
    throw Error("top_p " + std::to_string(o.top_p) + " is invalid; expected 0 < top_p <= 1");
  if (!(o.repeat_penalty > 0.0f) || !std::isfinite(o.repeat_penalty))
    throw Error("repeat_penalty " + std::to_string(o.repeat_penalty) + " is invalid; expected > 0");
}

// What a draw needs besides the logits: the options, the distinct recent tokens the repetition
// penalty applies to, and the uniform in [0, 1) that picks among the kept candidates. A sampler
// elsewhere (the GPU's, veloxquant/cuda_sampler.h) picks from it exactly as Sampler::pick does.
struct SampleRequest {
  SamplerOptions options;
  std::vector<int32_t> penalized;  // sorted, distinct; empty when repeat_penalty is 1
  double uniform = 0;              // unused at temperature 0
};

class Sampler {
 public:
  // Throws Error as check_sampler_options does.
  explicit Sampler(SamplerOptions options);

  // The next token for these logits (vocab floats). Does not record it: call accept().
  int32_t sample(std::span<const float> logits);
  // What sample() would use for its next token, taking the draw from the seeded stream (one
  // draw per token when temperature > 0, none when greedy), so that sampling elsewhere keeps the
  // sequence of tokens sample() would give. Does not record a token: call accept().
  SampleRequest request();
  // The token `request` picks from `logits`: the penalty, top-k, top-p, temperature, then the
  // draw. sample(l) is pick(l, request()). Ties between equal logits go to the lower token id.
  static int32_t pick(std::span<const float> logits, const SampleRequest& request);
  // Records a token of the sequence (prompt or generated) for the repetition penalty.
  void accept(int32_t token);

  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  std::mt19937_64 engine_;  // raw 64-bit draws only, so the stream is the same on every platform
  std::deque<int32_t> recent_;
};

}  // namespace veloxquant
