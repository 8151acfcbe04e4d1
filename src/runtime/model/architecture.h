// What sets one architecture apart from another, as llama.cpp's name tables and graphs record
// it. The tensor names and the graph (RMSNorm, RoPE, grouped-query attention, a gated
// feed-forward) are shared; each architecture's file says how its block differs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/model.h"
#include "veloxquant/rope.h"

namespace veloxquant::runtime {

class MetadataReader;  // hyperparameters.h

struct Architecture {
  std::string_view name;           // general.architecture, also the prefix of its hyperparameter keys
  RopeLayout rope_layout;          // how its converted q/k weights expect pairs to be rotated
  bool requires_qkv_bias = false;  // q/k/v projections must carry biases
  bool qk_norm = false;            // attn_q_norm / attn_k_norm, [head_dim] each
  bool post_norms = false;         // post_attention_norm / post_ffw_norm, [width] each
  Activation activation = Activation::Silu;
  bool scale_embeddings = false;  // token embeddings times sqrt(width)
  bool yarn_keys = false;         // reads rope.scaling.yarn_beta_fast/_slow, yarn_log_multiplier
  bool tied_output = false;       // the output projection is token_embd, whatever else the file holds
  bool optional_values = false;   // a layer without attn_v takes the key projection's output as values
  // Reads what only this architecture has (sliding windows, soft-capping, ...) into c, after
  // the shared hyperparameters; null: nothing more.
  void (*read_extra)(const MetadataReader& r, ModelConfig& c) = nullptr;
};

// Every supported architecture, in the order they are listed to users.
const std::vector<const Architecture*>& architectures();
// Throws FormatError naming `name`: a mixture-of-experts or hybrid architecture is refused as
// such; any other unknown one with the list of supported architectures.
const Architecture& find_architecture(std::string_view name);

}  // namespace veloxquant::runtime
