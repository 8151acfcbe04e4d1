#include "codecs/kivi/lane_tiles.h"

#include <algorithm>
#include <cstring>


namespace veloxquant::kivi {
namespace {
// Byte `i` of lane `lane` in word row `row`, shift k, holds code[token][channel] with
// key tiles:   token = lane, channel = row * key_row_channels + 4k + i
// value quads: token = i,    channel = row * value_row_channels + 16k + lane
template <typename Index>
void pack(const uint8_t* codes, size_t dim, unsigned bits, size_t row_channels, uint8_t* out,
          Index index) {
  const unsigned cpb = codes_per_byte(bits);
  for (size_t row = 0; row < dim / row_channels; ++row)
    for (size_t lane = 0; lane < kLanes; ++lane)
      for (size_t i = 0; i < 4; ++i) {
        unsigned byte = 0;
        for (unsigned k = 0; k < cpb; ++k) byte |= static_cast<unsigned>(codes[index(row, lane, i, k)]) << (bits * k);
        out[row * kRowBytes + lane * 4 + i] = static_cast<uint8_t>(byte);
      }
}

template <typename Index>
void unpack(const uint8_t* in, size_t dim, unsigned bits, size_t row_channels, uint8_t* codes,
            Index index) {
  const unsigned cpb = codes_per_byte(bits), mask = (1u << bits) - 1u;
  for (size_t row = 0; row < dim / row_channels; ++row)
    for (size_t lane = 0; lane < kLanes; ++lane)
      for (size_t i = 0; i < 4; ++i) {
        const unsigned byte = in[row * kRowBytes + lane * 4 + i];
        for (unsigned k = 0; k < cpb; ++k) codes[index(row, lane, i, k)] = static_cast<uint8_t>((byte >> (bits * k)) & mask);
      }
}

auto key_index(size_t dim, unsigned bits) {
  const size_t rc = key_row_channels(bits);
  return [dim, rc](size_t row, size_t lane, size_t i, unsigned k) { return lane * dim + row * rc + 4 * k + i; };
}
auto value_index(size_t dim, unsigned bits) {
  const size_t rc = value_row_channels(bits);
  return [dim, rc](size_t row, size_t lane, size_t i, unsigned k) { return i * dim + row * rc + 16 * k + lane; };
}

}  // namespace

void pack_key_tile(const uint8_t* codes, size_t dim, unsigned bits, uint8_t* out) {
  pack(codes, dim, bits, key_row_channels(bits), out, key_index(dim, bits));
}
void unpack_key_tile(const uint8_t* tile, size_t dim, unsigned bits, uint8_t* codes) {
  unpack(tile, dim, bits, key_row_channels(bits), codes, key_index(dim, bits));
}
void pack_value_quad(const uint8_t* codes, size_t dim, unsigned bits, uint8_t* out) {
  pack(codes, dim, bits, value_row_channels(bits), out, value_index(dim, bits));
}
void unpack_value_quad(const uint8_t* quad, size_t dim, unsigned bits, uint8_t* codes) {
  unpack(quad, dim, bits, value_row_channels(bits), codes, value_index(dim, bits));
}

}  // namespace veloxquant::kivi
