// What sets one Llama-family architecture apart from another, as llama.cpp's name tables record
// it. The tensor names and the graph (RMSNorm, RoPE, grouped-query attention, SwiGLU) are
// shared; each architecture's file says how it differs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/rope.h"

namespace veloxquant::runtime {

struct Architecture {
  std::string_view name;    // general.architecture, also the prefix of its hyperparameter keys
  RopeLayout rope_layout;   // how its converted q/k weights expect pairs to be rotated
  bool requires_qkv_bias;   // q/k/v projections must carry biases
};

// Every supported architecture, in the order they are listed to users.
const std::vector<const Architecture*>& architectures();
// Throws FormatError naming `name` and listing the supported architectures.
const Architecture& find_architecture(std::string_view name);

}  // namespace veloxquant::runtime
