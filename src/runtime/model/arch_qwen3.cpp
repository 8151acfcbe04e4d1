// qwen3: qwen2's NeoX RoPE without the q/k/v biases, and an RMSNorm over each head of q and k
// (attn_q_norm, attn_k_norm) before RoPE. Its heads are often wider than width / heads
// (attention.key_length), which the shared loader reads.
#include "runtime/model/architecture.h"

namespace veloxquant::runtime {

extern const Architecture kQwen3{.name = "qwen3", .rope_layout = RopeLayout::Neox, .qk_norm = true};

}  // namespace veloxquant::runtime
