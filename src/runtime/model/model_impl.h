// The loaded model: hyperparameters, tokenizer and weight views into the file's mapping.
#pragma once

#include <optional>
#include <vector>

#include "runtime/weights/weight_matrix.h"
#include "veloxquant/model.h"

namespace veloxquant {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [embedding]
  // Views of one fused attn_qkv / ffn_up tensor where the file fuses them (phi3).
  runtime::WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;                     // empty when the model has no q/k/v biases
  std::vector<float> q_norm, k_norm;                 // [head_dim]; empty without ModelConfig::qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // [embedding]; empty without post_norms
  runtime::WeightMatrix gate, up, down;
  // Where `wv` is empty (rows 0), the values are the key projection's output (gemma4).
  // Shared-KV layers (ModelConfig::shared_kv_layers) have no wk, wv or k_norm.
  float output_scale = 1.0f;  // layer_output_scale: the layer's output is multiplied by it (gemma4)
  // The per-layer token input (ModelConfig::per_layer_embedding): inp_gate [per_layer, embedding],
  // proj [embedding, per_layer], post_norm [embedding]; empty without it.
  runtime::WeightMatrix per_layer_gate, per_layer_proj;
  std::vector<float> per_layer_post_norm;
};

struct Model::Impl {
  GgufFile file;
  ModelConfig config;
  std::optional<Tokenizer> tokenizer;
  runtime::WeightMatrix token_embd;  // [vocab, embedding]
  runtime::WeightMatrix output;      // [vocab, embedding]; token_embd when tied
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;
  // ModelConfig::per_layer_embedding: each token's row of every layer's input
  // [vocab, layers * per_layer], its projection from the embeddings [layers * per_layer,
  // embedding], and the RMSNorm of each layer's slice of it [per_layer].
  runtime::WeightMatrix per_layer_token_embd, per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  // phi3's 128k models: RoPE frequency divisors for contexts past the original one
  // (rope_factors_long.weight; the short ones are config.rope's); null otherwise.
  std::shared_ptr<const std::vector<float>> rope_long_factors;
  uint32_t rope_original_context = 0;  // a session's context above it takes the long factors
  size_t parameters = 0;
  size_t weight_bytes = 0;

  explicit Impl(GgufFile f) : file(std::move(f)) {}
};

// The loaded weights and hyperparameters behind a Model, for the runtime's forward passes.
struct ModelInternals {
  static const Model::Impl& of(const Model& model) { return *model.impl_; }
};

}  // namespace veloxquant
