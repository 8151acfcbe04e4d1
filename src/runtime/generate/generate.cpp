#include "veloxquant/generate.h"

#include <span>

namespace veloxquant {

std::vector<int32_t> generate(Session& session, Sampler& sampler, std::vector<float> logits,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const Tokenizer& tok = session.model().tokenizer();
  std::vector<int32_t> generated;
  if (options.max_tokens == 0) return generated;
  // The first token from the prompt's logits (evaluated or restored from a session file), each
  // later one from the logits the session keeps: on the GPU they never leave it.
  int32_t next = sampler.sample(logits);
  while (options.ignore_eos || !tok.is_end_of_generation(next)) {
    generated.push_back(next);
    sampler.accept(next);
    if (on_token) on_token(next);
    // The last token is not evaluated: nothing would read its logits.
    if (generated.size() == options.max_tokens || session.room() == 0) break;
    session.eval(std::span(&next, 1), Logits::Sample);
    next = session.sample(sampler);
  }
  return generated;
}

}  // namespace veloxquant
