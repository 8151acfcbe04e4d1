// ggml's block formats decoded to f32, one block at a time: the reference that dequantize()
// and the weight kernels share. Each decoder rounds in the same order as llama.cpp's numpy
// reference (gguf.quants.dequantize), so its values equal that reference bit for bit.
#pragma once

#include <cstdint>

#include "veloxquant/gguf.h"

namespace veloxquant::gguf {

// Decodes one block of `type` (ggml_block_elements(type) values from ggml_block_bytes(type)
// bytes at `block`, any alignment) into out.
using BlockDecoder = void (*)(const uint8_t* block, float* out);

// One block of each quantized type the runtime decodes, into out (32 or 256 floats).
void decode_q8_0(const uint8_t* block, float* out);
void decode_q4_0(const uint8_t* block, float* out);
void decode_q4_1(const uint8_t* block, float* out);
void decode_q5_0(const uint8_t* block, float* out);
void decode_q5_1(const uint8_t* block, float* out);
void decode_q2_k(const uint8_t* block, float* out);
void decode_q3_k(const uint8_t* block, float* out);
void decode_q4_k(const uint8_t* block, float* out);
void decode_q5_k(const uint8_t* block, float* out);
void decode_q6_k(const uint8_t* block, float* out);
void decode_iq4_nl(const uint8_t* block, float* out);
void decode_iq4_xs(const uint8_t* block, float* out);

// The decoder of a quantized type (every type with blocks of more than one element that
// ggml_type_decodable accepts), or nullptr for the plain types and the undecodable ones.
BlockDecoder block_decoder(GgmlType type);

}  // namespace veloxquant::gguf
