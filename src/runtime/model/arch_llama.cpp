// llama (also Mistral GGUFs, which llama.cpp converts under this name). Its converter permutes
// the q/k weight rows so that RoPE rotates adjacent pairs; no biases.
#include "runtime/model/architecture.h"

namespace veloxquant::runtime {

extern const Architecture kLlama{"llama", RopeLayout::Interleaved, false};

}  // namespace veloxquant::runtime
