// qwen2: the llama graph with biases on the q/k/v projections and NeoX-style RoPE (pairs i and
// i + dims/2), since its converter keeps the Hugging Face weight order.
#include "runtime/model/architecture.h"

namespace veloxquant::runtime {

extern const Architecture kQwen2{.name = "qwen2", .rope_layout = RopeLayout::Neox, .requires_qkv_bias = true};

}  // namespace veloxquant::runtime
