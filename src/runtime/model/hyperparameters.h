// Reads a model's hyperparameters from GGUF metadata ("<arch>.block_count", ...).
#pragma once

#include "runtime/model/architecture.h"
#include "veloxquant/model.h"

namespace veloxquant::runtime {

// Throws FormatError naming the key for a missing, mistyped or out-of-range value, and for
// features the runtime does not implement (e.g. YaRN RoPE scaling).
ModelConfig read_hyperparameters(const GgufFile& file, const Architecture& arch);

}  // namespace veloxquant::runtime
