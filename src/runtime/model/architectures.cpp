#include <array>
#include <string>

#include "runtime/model/architecture.h"
#include "veloxquant/gguf.h"
#include "veloxquant/model.h"

namespace veloxquant::runtime {

// One file per architecture.
extern const Architecture kLlama, kMistral3, kQwen2, kQwen3, kPhi3, kGemma2, kGemma3, kGemma4;

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all{&kLlama, &kMistral3, &kQwen2,  &kQwen3,
                                                    &kPhi3,  &kGemma2,   &kGemma3, &kGemma4};
  return all;
}

namespace {

// Architectures whose blocks route tokens to experts or replace attention with a recurrence:
// told apart from unknown names, since the project's caches hold attention keys and values of
// dense layers only.
constexpr std::array kMixtureOrHybrid{"qwen2moe",   "qwen3moe", "qwen35",     "qwen35moe",  "qwen3next",
                                      "mixtral",    "dbrx",     "deepseek",   "deepseek2",  "llama4",
                                      "gemma3n",    "phimoe",   "granitemoe", "olmoe",      "jamba",
                                      "mamba",      "mamba2",   "falcon-h1",  "nemotron_h", "lfm2",
                                      "minimax-m2", "gpt-oss",  "glm4moe"};

}  // namespace

const Architecture& find_architecture(std::string_view name) {
  std::string supported;
  for (const Architecture* a : architectures()) {
    if (a->name == name) return *a;
    supported += (supported.empty() ? "" : ", ") + std::string(a->name);
  }
  for (std::string_view refused : kMixtureOrHybrid) {
    if (refused == name) {
      throw FormatError("architecture '" + std::string(name) +
                        "' is a mixture-of-experts or hybrid "
                        "(recurrent) model, which the runtime does not run; supported: " +
                        supported);
    }
  }
  throw FormatError("architecture '" + std::string(name) + "' is not supported; supported: " + supported);
}

}  // namespace veloxquant::runtime

namespace veloxquant {

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const runtime::Architecture* a : runtime::architectures()) names.emplace_back(a->name);
  return names;
}

}  // namespace veloxquant
