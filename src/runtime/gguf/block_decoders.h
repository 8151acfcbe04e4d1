// ggml's block formats decoded to f32, one block at a time: the reference behind dequantize()
// and the embedding lookups (the weight products multiply the codes of block_codes.h directly).
// Each decoder rounds in the same order as llama.cpp's numpy reference
// (gguf.quants.dequantize), so its values equal that reference bit for bit.
#pragma once

#include <cstdint>

#include "veloxquant/gguf.h"

namespace veloxquant::gguf {

// Decodes one block of `type` (ggml_block_elements(type) values from ggml_block_bytes(type)
// bytes at `block`, any alignment) into out.
using BlockDecoder = void (*)(const uint8_t* block, float* out);

// The decoder of a quantized type (every type with blocks of more than one element that
// ggml_type_decodable accepts), or nullptr for the plain types and the undecodable ones.
BlockDecoder block_decoder(GgmlType type);

}  // namespace veloxquant::gguf
