// ggml's quantized block formats as small unsigned integer codes and per-group scales: element e
// of a block is
//     scale[g] * (code[e] - kCodeOffset) + offset[g]      g = e / kGroup, offset only if kHasMin
// (exact integers times the f32 scales). The reference decoders (block_decoders.cpp) evaluate
// that formula in f32; the integer weight kernels (runtime/weights) multiply the codes by int8
// activations and apply the scales once per group. One description of each bit layout serves
// both, and the decoders' bit-exactness with gguf.quants.dequantize checks it.
//
// Each format: kElements and kBytes of one block, kGroup elements per scale (16 or 32), the code
// offset, whether a per-group offset (the k-quants' mins, Q4_1/Q5_1's m) exists, and
// unpack(block, code[kElements], scale[kElements / kGroup], offset[same]) (offset untouched
// without kHasMin). Layouts as ggml-common.h defines them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "veloxquant/gguf.h"
#include "veloxquant/tensor.h"

namespace veloxquant::gguf {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The 16 signed levels of IQ4_NL and IQ4_XS (kvalues_iq4nl), plus 128: their codes.
alignas(16) inline constexpr uint8_t kIq4Codes[16] = {1,   24,  45,  63,  79,  93,  106, 118,
                                                      129, 141, 153, 166, 181, 197, 217, 241};

// Codes 0..15 from 16 bytes whose low nibbles are elements 0..15 and high nibbles 16..31.
inline void split_nibbles(const uint8_t* qs, uint8_t* code) {
  for (int j = 0; j < 16; ++j) {
    code[j] = qs[j] & 0x0f;
    code[j + 16] = qs[j] >> 4;
  }
}

// ORs 16 into code j where bit j of the little-endian word at qh is set (Q5_0, Q5_1).
inline void add_fifth_bits(const uint8_t* qh, uint8_t* code) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  for (int j = 0; j < 32; ++j) code[j] |= static_cast<uint8_t>(((h >> j) & 1) << 4);
}

// The constants of a format.
template <size_t Elements, size_t Bytes, size_t Group, int CodeOffset, bool HasMin>
struct BlockLayout {
  static constexpr size_t kElements = Elements, kBytes = Bytes, kGroup = Group;
  static constexpr int kCodeOffset = CodeOffset;
  static constexpr bool kHasMin = HasMin;
};

// Q8_0: d, then 32 int8 values, stored here as value + 128.
struct Q8_0Codes : BlockLayout<32, 34, 32, 128, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    scale[0] = f16_at(b);
    for (int j = 0; j < 32; ++j) code[j] = b[2 + j] ^ 0x80;
  }
};

// Q4_0: d, then nibbles (see split_nibbles), offset by 8.
struct Q4_0Codes : BlockLayout<32, 18, 32, 8, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    scale[0] = f16_at(b);
    split_nibbles(b + 2, code);
  }
};

// Q4_1: d, m, then nibbles: d * q + m.
struct Q4_1Codes : BlockLayout<32, 20, 32, 0, true> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float* offset) {
    scale[0] = f16_at(b);
    offset[0] = f16_at(b + 2);
    split_nibbles(b + 4, code);
  }
};

// Q5_0: d, 32 fifth bits, then nibbles: d * (q - 16).
struct Q5_0Codes : BlockLayout<32, 22, 32, 16, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    scale[0] = f16_at(b);
    split_nibbles(b + 6, code);
    add_fifth_bits(b + 2, code);
  }
};

// Q5_1: d, m, 32 fifth bits, then nibbles: d * q + m.
struct Q5_1Codes : BlockLayout<32, 24, 32, 0, true> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float* offset) {
    scale[0] = f16_at(b);
    offset[0] = f16_at(b + 2);
    split_nibbles(b + 8, code);
    add_fifth_bits(b + 4, code);
  }
};

// IQ4_NL: d, then nibbles laid out as Q4_0's, each an index into the non-uniform levels.
struct IQ4_NLCodes : BlockLayout<32, 18, 32, 128, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    scale[0] = f16_at(b);
    for (int j = 0; j < 16; ++j) {
      code[j] = kIq4Codes[b[2 + j] & 0x0f];
      code[j + 16] = kIq4Codes[b[2 + j] >> 4];
    }
  }
};

// The 2-bit codes of Q2_K and Q3_K: byte i of each 32-byte half of qs holds elements i, i+32,
// i+64, i+96 of that half's 128, lowest bits first.
inline void split_crumbs(const uint8_t* qs, uint8_t* code) {
  for (int half = 0; half < 2; ++half)
    for (int shift = 0; shift < 8; shift += 2)
      for (int i = 0; i < 32; ++i) code[half * 128 + shift * 16 + i] = (qs[half * 32 + i] >> shift) & 3;
}

// Q2_K: 16 scale bytes (low nibble: scale, high nibble: min of each 16 elements), 64 bytes of
// 2-bit codes (split_crumbs), d, dmin.
struct Q2_KCodes : BlockLayout<256, 84, 16, 0, true> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float* offset) {
    const float d = f16_at(b + 80), dmin = f16_at(b + 82);
    for (int g = 0; g < 16; ++g) {
      scale[g] = d * static_cast<float>(b[g] & 0x0f);
      offset[g] = -(dmin * static_cast<float>(b[g] >> 4));
    }
    split_crumbs(b + 16, code);
  }
};

// Q3_K: 32 bytes of high bits (bit k of byte i: element k * 32 + i), 64 bytes of 2-bit codes
// (split_crumbs), 12 bytes of 16 six-bit scales offset by 32, d. A clear high bit subtracts 4: the
// code is the low bits plus 4 times the high bit, offset by 4.
struct Q3_KCodes : BlockLayout<256, 110, 16, 4, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    const uint8_t *hmask = b, *packed = b + 96;
    const float d = f16_at(b + 108);
    for (int s = 0; s < 16; ++s) {
      const int lo = (packed[s % 8] >> (s / 8 * 4)) & 0x0f;
      const int hi = (packed[8 + s % 4] >> (s / 4 * 2)) & 3;
      scale[s] = d * static_cast<float>((lo | hi << 4) - 32);
    }
    split_crumbs(b + 32, code);
    for (int k = 0; k < 8; ++k)
      for (int i = 0; i < 32; ++i) code[k * 32 + i] |= static_cast<uint8_t>(((hmask[i] >> k) & 1) << 2);
  }
};

// The six-bit scale and min of sub-block j (of 8) in the 12 packed bytes of Q4_K and Q5_K.
inline void scale_min_k4(const uint8_t* p, int j, int& scale, int& min) {
  if (j < 4) {
    scale = p[j] & 63;
    min = p[j + 4] & 63;
  } else {
    scale = (p[j + 4] & 0x0f) | ((p[j - 4] >> 6) << 4);
    min = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, 12 bytes of scales and mins for 8 sub-blocks of 32, then 128 bytes in which
// byte i of each 32-byte chunk c holds elements c * 64 + i (low nibble) and c * 64 + 32 + i.
// Q5_K adds 32 bytes of fifth bits before the nibbles (bit k of byte i: element k * 32 + i).
template <bool kFifthBit>
struct Q45_KCodes : BlockLayout<256, kFifthBit ? 176 : 144, 32, 0, true> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float* offset) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scale_min_k4(b + 4, j, sc, m);
      scale[j] = d * static_cast<float>(sc);
      offset[j] = -(dmin * static_cast<float>(m));
    }
    const uint8_t* qs = b + (kFifthBit ? 48 : 16);
    for (int c = 0; c < 4; ++c) {
      for (int i = 0; i < 32; ++i) {
        code[c * 64 + i] = qs[c * 32 + i] & 0x0f;
        code[c * 64 + 32 + i] = qs[c * 32 + i] >> 4;
      }
    }
    if constexpr (kFifthBit) {
      const uint8_t* qh = b + 16;
      for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 32; ++i) code[k * 32 + i] |= static_cast<uint8_t>(((qh[i] >> k) & 1) << 4);
    }
  }
};
using Q4_KCodes = Q45_KCodes<false>;
using Q5_KCodes = Q45_KCodes<true>;

// Q6_K: 128 bytes of low nibbles (byte i of each 64-byte half: element i, low, and 64 + i, high),
// 64 bytes of 2-bit high parts (byte i of each 32-byte half: elements i, 32 + i, 64 + i, 96 + i),
// 16 int8 scales of 16 elements, d. Codes are offset by 32.
struct Q6_KCodes : BlockLayout<256, 210, 16, 32, false> {
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    const float d = f16_at(b + 208);
    for (int g = 0; g < 16; ++g) scale[g] = d * static_cast<float>(static_cast<int8_t>(b[192 + g]));
    for (int half = 0; half < 2; ++half) {
      const uint8_t *ql = b + half * 64, *qh = b + 128 + half * 32;
      uint8_t* out = code + half * 128;
      for (int i = 0; i < 32; ++i) {
        out[i] = (ql[i] & 0x0f) | ((qh[i] & 3) << 4);
        out[32 + i] = (ql[32 + i] & 0x0f) | (((qh[i] >> 2) & 3) << 4);
        out[64 + i] = (ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4);
        out[96 + i] = (ql[32 + i] >> 4) | (((qh[i] >> 6) & 3) << 4);
      }
    }
  }
};

// IQ4_XS: d, 16 bits of scale high parts (2 per sub-block), 4 bytes of scale low nibbles, then 8
// sub-blocks of 32 laid out as IQ4_NL blocks; scales are six-bit, offset by 32.
struct IQ4_XSCodes : BlockLayout<256, 136, 32, 128, false> {
  // The 8 sub-blocks' scales.
  static void scales(const uint8_t* b, float* scale) {
    const float d = f16_at(b);
    uint16_t scales_h;
    std::memcpy(&scales_h, b + 2, 2);
    for (int j = 0; j < 8; ++j) {
      const int lo = (b[4 + j / 2] >> (j % 2 * 4)) & 0x0f;
      const int hi = (scales_h >> (2 * j)) & 3;
      scale[j] = d * static_cast<float>((lo | hi << 4) - 32);
    }
  }
  static void unpack(const uint8_t* b, uint8_t* code, float* scale, float*) {
    scales(b, scale);
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 16; ++i) {
        code[j * 32 + i] = kIq4Codes[b[8 + j * 16 + i] & 0x0f];
        code[j * 32 + 16 + i] = kIq4Codes[b[8 + j * 16 + i] >> 4];
      }
    }
  }
};

// Calls fn(Codes{}) with the format of a quantized type and returns true; false for any other type.
template <class Fn>
bool with_block_codes(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::Q8_0: fn(Q8_0Codes{}); return true;
    case GgmlType::Q4_0: fn(Q4_0Codes{}); return true;
    case GgmlType::Q4_1: fn(Q4_1Codes{}); return true;
    case GgmlType::Q5_0: fn(Q5_0Codes{}); return true;
    case GgmlType::Q5_1: fn(Q5_1Codes{}); return true;
    case GgmlType::IQ4_NL: fn(IQ4_NLCodes{}); return true;
    case GgmlType::Q2_K: fn(Q2_KCodes{}); return true;
    case GgmlType::Q3_K: fn(Q3_KCodes{}); return true;
    case GgmlType::Q4_K: fn(Q4_KCodes{}); return true;
    case GgmlType::Q5_K: fn(Q5_KCodes{}); return true;
    case GgmlType::Q6_K: fn(Q6_KCodes{}); return true;
    case GgmlType::IQ4_XS: fn(IQ4_XSCodes{}); return true;
    default: return false;
  }
}

}  // namespace veloxquant::gguf
