// Picks the next token from logits: repetition penalty, top-k, top-p, temperature, then a seeded
// draw — the order llama.cpp's default sampler chain applies them. Temperature 0 is greedy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

namespace veloxquant {

struct SamplerOptions {
  float temperature = 0.8f;     // 0: always the most likely token
  int top_k = 40;               // keep the k most likely; 0 keeps all
  float top_p = 0.95f;          // keep the smallest set whose probability reaches p; 1 keeps all
  float repeat_penalty = 1.0f;  // > 1 discourages tokens seen in the last repeat_last_n
  size_t repeat_last_n = 64;
  uint64_t seed = 0;
};

class Sampler {
 public:
  // Throws Error naming the option when a value is out of range (temperature < 0, top_p not in
  // (0, 1], repeat_penalty <= 0, top_k < 0).
  explicit Sampler(SamplerOptions options);

  // The next token for these logits (vocab floats). Does not record it: call accept().
  int32_t sample(std::span<const float> logits);
  // Records a token of the sequence (prompt or generated) for the repetition penalty.
  void accept(int32_t token);

  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  std::mt19937_64 engine_;  // raw 64-bit draws only, so the stream is the same on every platform
  std::deque<int32_t> recent_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace veloxquant
