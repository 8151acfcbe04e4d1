// mistral3 (the dense Ministral / Mistral Small 3 text models): the llama graph with YaRN betas
// and log multiplier of its own, and, when attention.temperature_scale is set, queries scaled up
// with the log of their position in units of the original context (llama 4's temperature
// tuning).
#include "runtime/model/architecture.h"
#include "runtime/model/hyperparameters.h"

namespace veloxquant::runtime {
namespace {

void read_mistral3(const MetadataReader& r, ModelConfig& c) {
  c.attention_temperature_scale = r.number("attention.temperature_scale", 0.0f);
  if (c.attention_temperature_scale != 0.0f) {
    c.attention_temperature_floor =
        r.count("rope.scaling.original_context_length", 1, int64_t{1} << 30, c.context_length);
  }
}

}  // namespace

extern const Architecture kMistral3{.name = "mistral3", .rope_layout = RopeLayout::Interleaved,
                                    .yarn_keys = true, .read_extra = read_mistral3};

}  // namespace veloxquant::runtime
