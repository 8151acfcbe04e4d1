#include "core/bitpack.h"

#include <cstring>

namespace veloxquant {
namespace {

template <unsigned B>
void unpack_whole_bytes_f32(const uint8_t* in, size_t n, float* out) {
  constexpr unsigned K = 8 / B, mask = (1u << B) - 1u;
  for (size_t i = 0; i < n / K; ++i) {
    const unsigned byte = in[i];
    for (unsigned k = 0; k < K; ++k) out[i * K + k] = static_cast<float>((byte >> (B * k)) & mask);
  }
}

// Any width, code by code through an accumulator.
template <typename T>
void unpack_stream(const uint8_t* packed, size_t n, unsigned bits, T* out) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t acc = 0;
  unsigned avail = 0;
  size_t in = 0;
  for (size_t i = 0; i < n; ++i) {
    if (avail < bits) {
      acc |= static_cast<uint32_t>(packed[in++]) << avail;
      avail += 8;
    }
    out[i] = static_cast<T>(acc & mask);
    acc >>= bits;
    avail -= bits;
  }
}

}  // namespace

void pack_bits(const uint8_t* codes, size_t n, unsigned bits, uint8_t* out) {
  if (n == 0) return;  // empty spans may come with null pointers, which memcpy/memset forbid
  const size_t nbytes = packed_bytes(n, bits);
  if (bits == 8) {
    std::memcpy(out, codes, n);
    return;
  }
  std::memset(out, 0, nbytes);
  uint32_t acc = 0;
  unsigned filled = 0;
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    acc |= static_cast<uint32_t>(codes[i]) << filled;
    filled += bits;
    while (filled >= 8) {
      out[o++] = static_cast<uint8_t>(acc);
      acc >>= 8;
      filled -= 8;
    }
  }
  if (filled) out[o] = static_cast<uint8_t>(acc);
}

void unpack_bits(const uint8_t* packed, size_t n, unsigned bits, uint8_t* codes) {
  if (n == 0) return;
  if (bits == 8) {
    std::memcpy(codes, packed, n);
    return;
  }
  unpack_stream(packed, n, bits, codes);
}

void unpack_bits_f32(const uint8_t* packed, size_t n, unsigned bits, float* out) {
  if (n * bits % 8 == 0) {
    switch (bits) {
      case 1: return unpack_whole_bytes_f32<1>(packed, n, out);
      case 2: return unpack_whole_bytes_f32<2>(packed, n, out);
      case 4: return unpack_whole_bytes_f32<4>(packed, n, out);
      case 8: return unpack_whole_bytes_f32<8>(packed, n, out);
      default: break;
    }
  }
  unpack_stream(packed, n, bits, out);
}

}  // namespace veloxquant
