// Sub-byte bit packing: n codes of b bits (1..8) stored as one little-endian bit stream, code i
// at bits [i*b, (i+1)*b). ceil(n*b/8) bytes, no padding between codes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant {

constexpr size_t packed_bytes(size_t n, unsigned bits) { return (n * bits + 7) / 8; }

// REQUIRES: 1 <= bits <= 8, every code < 2^bits. Writes exactly packed_bytes(n, bits) bytes.
void pack_bits(const uint8_t* codes, size_t n, unsigned bits, uint8_t* out);
void unpack_bits(const uint8_t* packed, size_t n, unsigned bits, uint8_t* codes);
// The codes dequantized on an affine grid, out[i] = fma(code_i, step, min) (vectorized for 1, 2, 4
// and 8 bits), and the codes as floats (min 0, step 1), for kernels that take dot products with them.
void unpack_affine_f32(const uint8_t* packed, size_t n, unsigned bits, float min, float step, float* out);
void unpack_bits_f32(const uint8_t* packed, size_t n, unsigned bits, float* out);
// The codes as entries of a table of 2^bits values, scaled: out[i] = scale * table[code_i]
// (vectorized where the table fits two vectors: up to 4 bits with AVX-512, 3 with AVX2).
void unpack_table_f32(const uint8_t* packed, size_t n, unsigned bits, const float* table, float scale,
                      float* out);

}  // namespace veloxquant
