// Text generation: a session continued token by token by a sampler. The CLI's `generate` and the
// Python package share this loop, so both stop at the same token for the same inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "veloxquant/model.h"
#include "veloxquant/sampler.h"

namespace veloxquant {

struct GenerateOptions {
  size_t max_tokens = 128;
  bool ignore_eos = false;  // keep generating past end-of-generation tokens (long-run tests)
};

// Samples up to options.max_tokens tokens after `logits`, what Session::eval returned for the
// session's last token. Each token is accepted by the sampler, handed to `on_token` (may be
// empty) and, unless it is the last one, evaluated. Stops before an end-of-generation token
// (unless ignore_eos) and once the session has no room left. The caller accepts the prompt's
// tokens into the sampler first. Returns the generated tokens.
std::vector<int32_t> generate(Session& session, Sampler& sampler, std::vector<float> logits,
                              const GenerateOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace veloxquant
