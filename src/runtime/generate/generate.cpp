#include "veloxquant/generate.h"

#include <span>

namespace veloxquant {

std::vector<int32_t> generate(Session& session, Sampler& sampler, std::vector<float> logits,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  const Tokenizer& tok = session.model().tokenizer();
  std::vector<int32_t> generated;
  while (generated.size() < options.max_tokens) {
    const int32_t next = sampler.sample(logits);
    if (!options.ignore_eos && tok.is_end_of_generation(next)) break;
    generated.push_back(next);
    sampler.accept(next);
    if (on_token) on_token(next);
    // The last token is not evaluated: nothing would read its logits.
    if (generated.size() == options.max_tokens || session.room() == 0) break;
    logits = session.eval(std::span(&next, 1), Logits::Last);
  }
  return generated;
}

}  // namespace veloxquant
