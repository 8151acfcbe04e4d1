// gemma4 (dense): gemma3's block with per-layer shapes. Windowed layers have their own head size
// (key_length_swa), RoPE dims and base; global layers rotate with rope_freqs' proportional
// factors. Scores are plain q.k (scale 1), values are RMS-normalized per head without a weight
// and are the key projection's output where a layer has no attn_v. The last shared_kv_layers
// layers attend through an earlier layer's cache, and the E2B/E4B models add a per-layer token
// input (ModelConfig::per_layer_embedding).
#include <algorithm>

#include "runtime/model/architecture.h"
#include "runtime/model/hyperparameters.h"

namespace veloxquant::runtime {
namespace {

// Windowed layers' head size (key_length_swa, equal to value_length_swa) and RoPE dims.
void read_window_heads(const MetadataReader& r, ModelConfig& c) {
  const uint32_t swa = r.count("attention.key_length_swa", 1, 4096);
  const uint32_t value_swa = r.count("attention.value_length_swa", 1, 4096);
  if (value_swa != swa) {
    throw FormatError(r.full("attention.value_length_swa") + " " + std::to_string(value_swa) +
                      " differs from " + r.full("attention.key_length_swa") + " " + std::to_string(swa) +
                      "; the runtime needs equal key and value head sizes");
  }
  c.sliding_rope.dims = r.count("rope.dimension_count_swa", 0, swa, std::min(c.rope.dims, swa));
  if (c.sliding_rope.dims % 2 != 0) {
    throw FormatError(r.full("rope.dimension_count_swa") + " is " + std::to_string(c.sliding_rope.dims) +
                      "; expected an even number");
  }
  bool differs = false;
  for (uint32_t l = 0; l < c.layers; ++l) differs = differs || (c.sliding(l) && swa != c.head_dim);
  if (!differs) return;
  c.layer_head_dim.clear();
  for (uint32_t l = 0; l < c.layers; ++l) c.layer_head_dim.push_back(c.sliding(l) ? swa : c.head_dim);
}

// Shared-KV layers read the cache of the last windowed or global cache layer (llama.cpp's reuse
// map), which must be of their own kind for its shape, window and RoPE to be theirs.
void read_shared_kv(const MetadataReader& r, ModelConfig& c) {
  c.shared_kv_layers = r.count("attention.shared_kv_layers", 0, c.layers, 0);
  if (c.shared_kv_layers == 0) return;
  if (c.cache_layers() < 2) {
    throw FormatError(r.full("attention.shared_kv_layers") + " is " + std::to_string(c.shared_kv_layers) +
                      " of " + std::to_string(c.layers) +
                      " layers; expected at least 2 layers with their own keys and values");
  }
  for (uint32_t l = c.cache_layers(); l < c.layers; ++l) {
    const size_t from = c.kv_layer(l);
    if (c.sliding(from) != c.sliding(l)) {
      throw FormatError(r.full("attention.shared_kv_layers") + ": layer " + std::to_string(l) + " (" +
                        (c.sliding(l) ? "windowed" : "global") + ") would attend through layer " +
                        std::to_string(from) + "'s cache, which is " +
                        (c.sliding(from) ? "windowed" : "global") +
                        "; expected the last two cache layers to be windowed, then global");
    }
  }
}

void read_gemma4(const MetadataReader& r, ModelConfig& c) {
  r.count("attention.sliding_window", 2, int64_t{1} << 30);  // required, as llama.cpp reads it
  if (!r.find("attention.sliding_window_pattern")) {
    throw FormatError("metadata key '" + r.full("attention.sliding_window_pattern") +
                      "' is missing; the model needs it (one flag per layer)");
  }
  read_sliding_window(r, c, 0, 0, false);
  read_window_heads(r, c);
  read_shared_kv(r, c);
  c.per_layer_embedding = r.count("embedding_length_per_layer_input", 0, 1 << 20, 0);
  c.final_softcap = r.number("final_logit_softcapping", 0.0f);
  c.attention_scale = 1.0f;  // Gemma 4's attention does not scale q.k
  c.value_norm = true;
}

}  // namespace

extern const Architecture kGemma4{.name = "gemma4",
                                  .rope_layout = RopeLayout::Neox,
                                  .qk_norm = true,
                                  .post_norms = true,
                                  .activation = Activation::GeluTanh,
                                  .scale_embeddings = true,
                                  .optional_values = true,
                                  .read_extra = read_gemma4};

}  // namespace veloxquant::runtime
