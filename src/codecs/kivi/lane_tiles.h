// KIVI's code layout, shaped for integer dot products: a "word row" is 16 lanes x 4 bytes
// (64 bytes, one AVX-512 register), and each byte holds 8/bits codes at shifts 0, bits, 2*bits...
// Extracting one shift from every byte gives 16 lanes of 4 small unsigned integers, exactly what
// a u8 x s8 four-way dot product (VNNI vpdpbusd) consumes (key_block_scores.cpp,
// value_span_sums.cpp).
//  - Key tiles: lane = token (16 tokens), the 4 bytes of a lane = 4 consecutive channels, so a
//    broadcast 4-channel slice of the query gives 16 token scores at once.
//  - Value quads: lane = channel (16 channels), the 4 bytes = 4 consecutive tokens, so a broadcast
//    slice of 4 attention weights accumulates 16 output channels at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::kivi {

inline constexpr size_t kLanes = 16;
inline constexpr size_t kRowBytes = 64;

inline unsigned codes_per_byte(unsigned bits) { return 8u / bits; }
// Channels covered by one word row of a key tile: 4 bytes x codes_per_byte.
inline size_t key_row_channels(unsigned bits) { return 4 * codes_per_byte(bits); }
// Channels covered by one word row of a value quad: 16 lanes x codes_per_byte.
inline size_t value_row_channels(unsigned bits) { return kLanes * codes_per_byte(bits); }

// codes: [16 tokens][dim] -> dim / key_row_channels word rows.
void pack_key_tile(const uint8_t* codes, size_t dim, unsigned bits, uint8_t* out);
void unpack_key_tile(const uint8_t* tile, size_t dim, unsigned bits, uint8_t* codes);
// codes: [4 tokens][dim] -> dim / value_row_channels word rows.
void pack_value_quad(const uint8_t* codes, size_t dim, unsigned bits, uint8_t* out);
void unpack_value_quad(const uint8_t* quad, size_t dim, unsigned bits, uint8_t* codes);

}  // namespace veloxquant::kivi
