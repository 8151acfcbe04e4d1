// The start of a generation: a fresh session or one restored from a session file, and the
// prompt's tokens checked against what the file holds. The CLI's `generate` and Model.generate
// share it, so --load-session and load_session= refuse the same prompts.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "veloxquant/error.h"
#include "veloxquant/generate.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The prompt's tokens must start with all of the session's, and only the tokens after them are
// evaluated: a cache cannot drop tokens, so a prompt that diverges cannot reuse any of it.
void check_continues(std::span<const int32_t> prompt, std::span<const int32_t> saved,
                     const Tokenizer& tok, const std::string& path) {
  for (size_t i = 0; i < std::min(prompt.size(), saved.size()); ++i) {
    if (prompt[i] == saved[i]) continue;
    throw Error(fmt::format("the prompt does not continue session file '{}': its token {} is {} "
                            "('{}') where the session has {} ('{}'); expected the prompt to start "
                            "with the session's {} tokens", path, i, prompt[i],
                            tok.token_to_piece(prompt[i]), saved[i], tok.token_to_piece(saved[i]),
                            saved.size()));
  }
  if (prompt.size() < saved.size()) {
    throw Error(fmt::format("the prompt has {} tokens, fewer than the {} of session file '{}'; "
                            "expected it to start with all of them (an empty prompt, or none: no -p, "
                            "continues the session as saved)", prompt.size(), saved.size(), path));
  }
}

}  // namespace

PromptSession open_prompt(const Model& model, std::string_view prompt, const PromptOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<SessionFile> saved;
  if (!options.load_session.empty()) saved = read_session_file(options.load_session);
  const std::string kv = options.kv ? *options.kv : saved ? saved->kv_spec : std::string("fp16");
  PromptSession p{Session(model, SessionOptions{kv, options.context, options.device, options.gpu_weights}), {}, 0, false, {}, 0};
  if (saved) {
    try {
      p.logits = restore_session(p.session, std::move(*saved));
    } catch (const Error& e) {
      throw Error(fmt::format("session file '{}': {}", options.load_session, e.what()));
    }
  }
  p.load_seconds = seconds_since(start);
  p.reused = p.session.position();
  const Tokenizer& tok = model.tokenizer();
  p.continued_as_saved = p.reused > 0 && prompt.empty();
  p.prompt = p.continued_as_saved ? std::vector<int32_t>(p.session.tokens().begin(), p.session.tokens().end())
                                  : tok.encode(prompt, /*add_bos=*/true);
  if (p.prompt.empty()) throw Error("the prompt encodes to no tokens and the model has no BOS token");
  check_continues(p.prompt, p.session.tokens(), tok, options.load_session);
  return p;
}

double evaluate_prompt(PromptSession& p, const std::string& save_path) {
  if (p.prompt.size() > p.reused) {
    p.logits = p.session.eval(std::span(p.prompt).subspan(p.reused), Logits::Last);
  }
  if (save_path.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  save_session(p.session, p.logits, save_path);
  return seconds_since(start);
}

}  // namespace veloxquant
