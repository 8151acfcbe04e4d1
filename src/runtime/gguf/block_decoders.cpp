// Block layouts as ggml-common.h defines them. This file is compiled with -ffp-contract=off
// (CMakeLists.txt): `d * q - m` must round twice, as numpy does, not once as a fused multiply-add.
#include "runtime/gguf/block_decoders.h"

#include <cstring>

#include "veloxquant/tensor.h"

namespace veloxquant::gguf {
namespace {

constexpr int kSuper = 256;  // elements of a k-quant or IQ4_XS super-block

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The 16 signed levels of IQ4_NL and IQ4_XS (kvalues_iq4nl).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace

// Q8_0: d, then 32 int8 codes.
void decode_q8_0(const uint8_t* b, float* out) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
}

// Q4_0: d, then 16 bytes: low nibbles are elements 0..15, high nibbles 16..31, offset by 8.
void decode_q4_0(const uint8_t* b, float* out) {
  const float d = f16_at(b);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>((b[2 + j] & 0x0f) - 8);
    out[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

// Q4_1: d, m, then nibbles as Q4_0, unsigned: d * q + m.
void decode_q4_1(const uint8_t* b, float* out) {
  const float d = f16_at(b), m = f16_at(b + 2);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(b[4 + j] & 0x0f) + m;
    out[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
  }
}

namespace {

// The fifth bit of element j of a Q5_0 / Q5_1 block: bit j of the little-endian word qh.
uint32_t high_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

}  // namespace

// Q5_0: d, 32 high bits, then nibbles as Q4_0: d * (q - 16).
void decode_q5_0(const uint8_t* b, float* out) {
  const float d = f16_at(b);
  const uint32_t qh = high_bits(b + 2);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[6 + j] & 0x0f) | ((qh >> j) & 1) << 4;
    const int hi = (b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
    out[j] = d * static_cast<float>(lo - 16);
    out[j + 16] = d * static_cast<float>(hi - 16);
  }
}

// Q5_1: d, m, 32 high bits, then nibbles: d * q + m.
void decode_q5_1(const uint8_t* b, float* out) {
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint32_t qh = high_bits(b + 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[8 + j] & 0x0f) | ((qh >> j) & 1) << 4;
    const int hi = (b[8 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
    out[j] = d * static_cast<float>(lo) + m;
    out[j + 16] = d * static_cast<float>(hi) + m;
  }
}

// Q2_K: 16 scale bytes (low nibble: scale, high nibble: min of each 16 elements), 64 bytes of
// 2-bit codes, d, dmin. Byte i of each 32-byte half holds elements i, i+32, i+64, i+96 of that
// half's 128, lowest bits first.
void decode_q2_k(const uint8_t* b, float* out) {
  const uint8_t *scales = b, *qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int e = 0; e < kSuper; ++e) {
    const int half = e / 128, shift = (e % 128) / 32 * 2, i = e % 32;
    const float dl = d * static_cast<float>(scales[e / 16] & 0x0f);
    const float ml = dmin * static_cast<float>(scales[e / 16] >> 4);
    out[e] = dl * static_cast<float>((qs[half * 32 + i] >> shift) & 3) - ml;
  }
}

// Q3_K: 32 bytes of high bits (bit k of byte i: element k * 32 + i), 64 bytes of 2-bit codes laid
// out as Q2_K's, 12 bytes of 16 six-bit signed scales, d. A clear high bit subtracts 4.
void decode_q3_k(const uint8_t* b, float* out) {
  const uint8_t *hmask = b, *qs = b + 32, *packed = b + 96;
  const float d = f16_at(b + 108);
  float dl[16];
  for (int s = 0; s < 16; ++s) {
    const int lo = (packed[s % 8] >> (s / 8 * 4)) & 0x0f;
    const int hi = (packed[8 + s % 4] >> (s / 4 * 2)) & 3;
    dl[s] = d * static_cast<float>((lo | hi << 4) - 32);
  }
  for (int e = 0; e < kSuper; ++e) {
    const int half = e / 128, shift = (e % 128) / 32 * 2, i = e % 32;
    const int low = (qs[half * 32 + i] >> shift) & 3;
    const int high = (hmask[i] >> (e / 32)) & 1;
    out[e] = dl[e / 16] * static_cast<float>(low - (high ? 0 : 4));
  }
}

namespace {

// The six-bit scale and min of sub-block j (of 8) in the 12 packed bytes of Q4_K and Q5_K.
void scale_min_k4(const uint8_t* p, int j, int& scale, int& min) {
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
void decode_q45_k_block(const uint8_t* b, float* out) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFifthBit ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    int scale, min;
    scale_min_k4(b + 4, j, scale, min);
    const float dl = d * static_cast<float>(scale), ml = dmin * static_cast<float>(min);
    for (int i = 0; i < 32; ++i) {
      int q = (qs[j / 2 * 32 + i] >> (j % 2 * 4)) & 0x0f;
      if constexpr (kFifthBit) q |= ((qh[i] >> j) & 1) << 4;
      out[j * 32 + i] = dl * static_cast<float>(q) - ml;
    }
  }
}

}  // namespace

void decode_q4_k(const uint8_t* b, float* out) { decode_q45_k_block<false>(b, out); }
void decode_q5_k(const uint8_t* b, float* out) { decode_q45_k_block<true>(b, out); }

// Q6_K: 128 bytes of low nibbles (byte i of each 64-byte half: element i, low, and 64 + i, high),
// 64 bytes of 2-bit high parts (byte i of each 32-byte half: elements i, 32 + i, 64 + i, 96 + i),
// 16 int8 scales of 16 elements, d. Codes are offset by 32.
void decode_q6_k(const uint8_t* b, float* out) {
  const uint8_t *ql = b, *qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int e = 0; e < kSuper; ++e) {
    const int half = e / 128, r = e % 128;
    const int low = (ql[half * 64 + r % 64] >> (r / 64 * 4)) & 0x0f;
    const int high = (qh[half * 32 + r % 32] >> (r / 32 * 2)) & 3;
    const float dl = d * static_cast<float>(scales[e / 16]);
    out[e] = dl * static_cast<float>((low | high << 4) - 32);
  }
}

// IQ4_NL: d, then nibbles laid out as Q4_0's, each an index into the non-uniform levels.
void decode_iq4_nl(const uint8_t* b, float* out) {
  const float d = f16_at(b);
  for (int j = 0; j < 16; ++j) {
    out[j] = d * static_cast<float>(kIq4Levels[b[2 + j] & 0x0f]);
    out[j + 16] = d * static_cast<float>(kIq4Levels[b[2 + j] >> 4]);
  }
}

// IQ4_XS: d, 16 bits of scale high parts (2 per sub-block), 4 bytes of scale low nibbles, then 8
// sub-blocks of 32 laid out as IQ4_NL blocks; scales are six-bit, offset by 32.
void decode_iq4_xs(const uint8_t* b, float* out) {
  const float d = f16_at(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t *scales_l = b + 4, *qs = b + 8;
  for (int j = 0; j < 8; ++j) {
    const int lo = (scales_l[j / 2] >> (j % 2 * 4)) & 0x0f;
    const int hi = (scales_h >> (2 * j)) & 3;
    const float dl = d * static_cast<float>((lo | hi << 4) - 32);
    for (int i = 0; i < 16; ++i) {
      out[j * 32 + i] = dl * static_cast<float>(kIq4Levels[qs[j * 16 + i] & 0x0f]);
      out[j * 32 + 16 + i] = dl * static_cast<float>(kIq4Levels[qs[j * 16 + i] >> 4]);
    }
  }
}

BlockDecoder block_decoder(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return decode_q8_0;
    case GgmlType::Q4_0: return decode_q4_0;
    case GgmlType::Q4_1: return decode_q4_1;
    case GgmlType::Q5_0: return decode_q5_0;
    case GgmlType::Q5_1: return decode_q5_1;
    case GgmlType::Q2_K: return decode_q2_k;
    case GgmlType::Q3_K: return decode_q3_k;
    case GgmlType::Q4_K: return decode_q4_k;
    case GgmlType::Q5_K: return decode_q5_k;
    case GgmlType::Q6_K: return decode_q6_k;
    case GgmlType::IQ4_NL: return decode_iq4_nl;
    case GgmlType::IQ4_XS: return decode_iq4_xs;
    default: return nullptr;
  }
}

}  // namespace veloxquant::gguf
