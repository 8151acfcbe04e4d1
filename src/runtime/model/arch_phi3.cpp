// phi3: NeoX RoPE, fused q/k/v (attn_qkv) and gate/up (ffn_up holding the gate rows first)
// tensors, which the loader splits into views. llama.cpp leaves its sliding window off (its
// converters do not record which layers use it), and so does the runtime; the long/short RoPE
// factors of the 128k models are chosen by the session's context.
#include "runtime/model/architecture.h"

namespace veloxquant::runtime {

extern const Architecture kPhi3{.name = "phi3", .rope_layout = RopeLayout::Neox};

}  // namespace veloxquant::runtime
