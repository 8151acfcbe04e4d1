// The fp16 scales of ggml's quantized blocks, checked before a tensor is used: a NaN or infinite
// scale would turn every product with its row into NaN, far from the file that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "veloxquant/gguf.h"

namespace veloxquant::gguf {

// Throws FormatError naming `tensor`, the first block whose scale (or minimum) is not finite and
// its value, for the quantized types whose block scales are fp16; nothing for the plain types.
void check_block_scales(const std::string& tensor, GgmlType type, std::span<const uint8_t> data);

}  // namespace veloxquant::gguf
