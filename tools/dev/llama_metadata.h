// The general.* and <arch>.* metadata llama.cpp's converters write for a Llama-family model, for
// the programs that write models: the random-weight fixtures and the exporter of the project's
// trained evaluation models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "veloxquant/gguf.h"

namespace veloxquant::dev {

struct LlamaHyperparameters {
  std::string arch = "llama";
  uint32_t layers = 0, context = 0, width = 0, ffn = 0, heads = 0, kv_heads = 0, head_dim = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_scale = 0;  // > 0: rope.scaling.type rope_scaling ("linear" or "yarn") with this factor
  std::string rope_scaling = "linear";
  // Written only when set: sliding-window attention, soft-capping, the windowed layers' RoPE
  // base and mistral3's query temperature (its floor is rope.scaling.original_context_length).
  uint32_t sliding_window = 0, sliding_window_pattern = 0;
  float attn_softcap = 0, final_softcap = 0, rope_base_swa = 0;
  float temperature_scale = 0;
  uint32_t original_context = 0;
};

// general.architecture, general.name, general.file_type (llama.cpp's llama_ftype for a model
// whose matrices are all `weight_type`), general.quantization_version for quantized types, and
// the hyperparameter keys.
std::vector<std::pair<std::string, GgufValue>> llama_metadata(const LlamaHyperparameters& h,
                                                              GgmlType weight_type,
                                                              const std::string& name);

}  // namespace veloxquant::dev
