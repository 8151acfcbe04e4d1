#include "llama_metadata.h"

namespace veloxquant::dev {
namespace {

uint32_t file_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    default: return 32;  // BF16
  }
}

}  // namespace

std::vector<std::pair<std::string, GgufValue>> llama_metadata(const LlamaHyperparameters& h,
                                                              GgmlType weight_type,
                                                              const std::string& name) {
  std::vector<std::pair<std::string, GgufValue>> m;
  const auto add = [&](std::string key, GgufValue v) { m.emplace_back(std::move(key), std::move(v)); };
  const std::string& a = h.arch;
  add("general.architecture", GgufValue(a));
  add("general.name", GgufValue(name));
  add("general.file_type", GgufValue(file_type(weight_type)));
  if (weight_type == GgmlType::Q8_0 || weight_type == GgmlType::Q4_0)
    add("general.quantization_version", GgufValue(uint32_t{2}));
  add(a + ".block_count", GgufValue(h.layers));
  add(a + ".context_length", GgufValue(h.context));
  add(a + ".embedding_length", GgufValue(h.width));
  add(a + ".feed_forward_length", GgufValue(h.ffn));
  add(a + ".attention.head_count", GgufValue(h.heads));
  add(a + ".attention.head_count_kv", GgufValue(h.kv_heads));
  // llama.cpp takes the head size as width / heads unless these say otherwise.
  if (h.heads * h.head_dim != h.width) {
    add(a + ".attention.key_length", GgufValue(h.head_dim));
    add(a + ".attention.value_length", GgufValue(h.head_dim));
  }
  add(a + ".attention.layer_norm_rms_epsilon", GgufValue(h.rms_eps));
  add(a + ".rope.freq_base", GgufValue(h.rope_base));
  add(a + ".rope.dimension_count", GgufValue(h.head_dim));
  if (h.rope_scale > 0) {
    add(a + ".rope.scaling.type", GgufValue(h.rope_scaling));
    add(a + ".rope.scaling.factor", GgufValue(h.rope_scale));
  }
  if (h.sliding_window) add(a + ".attention.sliding_window", GgufValue(h.sliding_window));
  if (h.sliding_window_pattern) add(a + ".attention.sliding_window_pattern", GgufValue(h.sliding_window_pattern));
  if (h.rope_base_swa > 0) add(a + ".rope.freq_base_swa", GgufValue(h.rope_base_swa));
  if (h.attn_softcap > 0) add(a + ".attn_logit_softcapping", GgufValue(h.attn_softcap));
  if (h.final_softcap > 0) add(a + ".final_logit_softcapping", GgufValue(h.final_softcap));
  if (h.temperature_scale > 0) add(a + ".attention.temperature_scale", GgufValue(h.temperature_scale));
  if (h.original_context) add(a + ".rope.scaling.original_context_length", GgufValue(h.original_context));
  return m;
}

}  // namespace veloxquant::dev
