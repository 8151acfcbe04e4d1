// The loaded model: hyperparameters, tokenizer and weight views into the file's mapping.
#pragma once

#include <optional>
#include <vector>

#include "runtime/weights/weight_matrix.h"
#include "veloxquant/model.h"

namespace veloxquant {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [embedding]
  runtime::WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // empty when the model has no q/k/v biases
  runtime::WeightMatrix gate, up, down;
};

struct Model::Impl {
  GgufFile file;
  ModelConfig config;
  std::optional<Tokenizer> tokenizer;
  runtime::WeightMatrix token_embd;  // [vocab, embedding]
  runtime::WeightMatrix output;      // [vocab, embedding]; token_embd when tied
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;
  size_t parameters = 0;
  size_t weight_bytes = 0;
};

}  // namespace veloxquant
