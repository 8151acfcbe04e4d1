// Text generation: a session continued token by token by a sampler. The CLI's `generate` and the
// Python package share this loop, so both stop at the same token for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/model.h"
#include "veloxquant/sampler.h"

namespace veloxquant {

struct GenerateOptions {
  size_t max_tokens = 128;
  bool ignore_eos = false;  // keep generating past end-of-generation tokens (long-run tests)
};

// Samples up to options.max_tokens tokens after `logits`, what Session::eval returned for the
// session's last token; each later token is picked by Session::sample (on the GPU for device
// cuda, as the host sampler would pick it). Each token is accepted by the sampler, handed to
// `on_token` (may be empty) and, unless it is the last one, evaluated. Stops before an
// end-of-generation token (unless ignore_eos) and once the session has no room left. The caller
// accepts the prompt's tokens into the sampler first. Returns the generated tokens.
std::vector<int32_t> generate(Session& session, Sampler& sampler, std::vector<float> logits,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

// Where a generation starts (the CLI's `generate` and Model.generate): a fresh session, or one
// restored from a session file that the prompt continues.
struct PromptOptions {
  std::optional<std::string> kv;  // the cache's spec; unset: the loaded file's, else fp16
  size_t context = 0;             // tokens (0: the model's)
  std::string load_session;       // a session file to restore first ("": none)
  Device device = Device::Cpu;
  GpuWeights gpu_weights = GpuWeights::F16;
};

struct PromptSession {
  Session session;
  std::vector<int32_t> prompt;  // the prompt's tokens, BOS first
  size_t reused = 0;            // of them, those restored from the session file
  bool continued_as_saved = false;  // the prompt was empty: continue the file's tokens as saved
  std::vector<float> logits;    // after the prompt's last token, once evaluate_prompt() ran
  double load_seconds = 0;
};

// Builds the session and tokenizes `prompt` (BOS added). With options.load_session the file is
// restored first and the prompt must start with all of its tokens (a cache cannot drop tokens);
// an empty prompt continues the file's tokens as saved. Throws Error naming the file and the
// first differing token otherwise, or when the prompt encodes to no tokens.
PromptSession open_prompt(const Model& model, std::string_view prompt, const PromptOptions& options);

// Evaluates the prompt's tokens after those restored and sets `logits`. With a save_path, then
// saves the session there (session_file.h); returns the seconds the save took.
double evaluate_prompt(PromptSession& p, const std::string& save_path = "");

}  // namespace veloxquant
