// llama (also Mistral GGUFs, which llama.cpp converts under this name). Its converter permutes
// the q/k weight rows so that RoPE rotates adjacent pairs; no biases. llama.cpp reads no sliding
// window for it, and neither does the runtime.
#include "runtime/model/architecture.h"

namespace veloxquant::runtime {

extern const Architecture kLlama{.name = "llama", .rope_layout = RopeLayout::Interleaved};

}  // namespace veloxquant::runtime
