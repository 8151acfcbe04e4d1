// Loaders for the integer kernels (int8_kernels.cpp): one unit of kUnit elements of a quantized
// row as vectors of codes and of group scales. Include only from the library's own sources
// (Highway with static dispatch).
//
// A loader is load(p, elements) for the unit at p, then scales(s, o) (lane g: group g's scale and
// offset, zeros past the unit's groups; wide targets only) and chunk(c) (the unit's codes
// c * Lanes(DU8) onwards); write_unit copies all of it into a Unit. UnitLoader serves every format and partial units through the
// scalar unpack of block_codes.h; the vector loaders below, for the types of llama-quantize's
// common presets, build the same codes in registers from the stored bytes. They are written for
// 64-byte vectors (AVX-512); on narrower targets every type takes UnitLoader.
#pragma once

#include <hwy/highway.h>

#include <cstring>
#include <type_traits>

#include "runtime/gguf/block_codes.h"
#include "runtime/weights/activations.h"
#include "runtime/weights/lane_sums.h"

namespace veloxquant::runtime::kernels {

using DI32 = hn::RebindToSigned<DF>;
using DU8 = hn::Repartition<uint8_t, DI32>;
using DI8 = hn::Repartition<int8_t, DI32>;
using VI32 = hn::Vec<DI32>;
using VU8 = hn::Vec<DU8>;
using DHalfU8 = hn::Half<DU8>;

inline constexpr size_t kUnit = kActivationUnit;  // elements a loader reads: one k-quant block
// Whether a vector holds 64 codes and 16 f32 scales (a unit's groups), as the vector loaders need.
inline constexpr bool kWide = hn::MaxLanes(DU8()) == 64;

template <class C>
inline constexpr size_t kUnitBytes = C::kBytes * (kUnit / C::kElements);
template <class C>
inline constexpr size_t kUnitGroups = kUnit / C::kGroup;

// One unit of a row unpacked: codes in element order and the scales and offsets of its groups
// (8 or 16; zeros past them, and room for the windows of narrow targets).
struct alignas(64) Unit {
  uint8_t code[kUnit] = {};
  float scale[32] = {};
  float offset[32] = {};
};

// Any format, and partial units (a whole number of blocks; the rest of the unit keeps what it
// held, which the zero activations past the row's end cancel).
template <class C>
struct UnitLoader {
  Unit unit;
  void load(const uint8_t* p, size_t elements) {
    for (size_t e = 0; e < elements; e += C::kElements, p += C::kBytes)
      C::unpack(p, unit.code + e, unit.scale + e / C::kGroup, unit.offset + e / C::kGroup);
  }
  void scales(VF& s, VF& o) const {
    s = hn::Load(DF(), unit.scale);
    o = hn::Load(DF(), unit.offset);
  }
  VU8 chunk(size_t c) const { return hn::Load(DU8(), unit.code + c * hn::Lanes(DU8())); }
};

// ---- helpers of the vector loaders ------------------------------------------------------------

// Lanes 0..7: the 8 bytes of `bytes` (little-endian) as floats; lanes 8..15: zero.
HWY_INLINE VF eight_bytes(uint64_t bytes) {
  const DF df;
  const hn::Repartition<uint64_t, DU8> d64;
  const auto v = hn::BitCast(DU8(), hn::Set(d64, bytes));
  const auto widened = hn::PromoteTo(DI32(), hn::LowerHalf(hn::LowerHalf(v)));
  return hn::IfThenElseZero(hn::FirstN(df, 8), hn::ConvertTo(df, widened));
}

// Lanes 0..7: the fp16 values at p + i * stride for i < 8 (the scales of a unit's 8 legacy
// blocks); lanes 8..15: zero.
HWY_INLINE VF gather_f16(const uint8_t* p, int32_t stride) {
  const DF df;
  const DI32 di32;
  const auto first8 = hn::FirstN(di32, 8);
  const auto offsets = hn::IfThenElseZero(first8, hn::Mul(hn::Iota(di32, 0), hn::Set(di32, stride)));
  const auto words = hn::GatherOffset(di32, reinterpret_cast<const int32_t*>(p), offsets);
  const auto bits = hn::DemoteTo(hn::Rebind<uint16_t, DI32>(), hn::And(words, hn::Set(di32, 0xffff)));
  const auto halves = hn::BitCast(hn::Rebind<hwy::float16_t, DI32>(), bits);
  return hn::IfThenElseZero(hn::RebindMask(df, first8), hn::PromoteTo(df, halves));
}

// The codes of two legacy blocks whose 16 bytes of nibbles are at q0 and q1 (split_nibbles'
// layout: low nibbles elements 0..15, high nibbles 16..31), in element order.
HWY_INLINE VU8 nibble_pair(const uint8_t* q0, const uint8_t* q1) {
  const DU8 du8;
  const DHalfU8 dh;
  const hn::Half<DHalfU8> dq;
  const auto both = hn::Combine(dh, hn::LoadU(dq, q1), hn::LoadU(dq, q0));
  // 16-byte blocks: q0 low, q1 low, q0 high, q1 high; reorder to q0 low, q0 high, q1 low, q1 high.
  const auto v = hn::Combine(du8, hn::ShiftRight<4>(both), hn::And(both, hn::Set(dh, 0x0f)));
  const hn::Repartition<uint64_t, DU8> d64;
  HWY_ALIGN static constexpr int64_t kOrder[8] = {0, 1, 4, 5, 2, 3, 6, 7};
  return hn::BitCast(du8, hn::TableLookupLanes(hn::BitCast(d64, v), hn::SetTableIndices(d64, kOrder)));
}

// codes | 16 where bit e of the 64-bit word is set (Q5_0's fifth bits of two blocks).
HWY_INLINE VU8 add_fifth_bits(VU8 codes, uint64_t bits) {
  const DU8 du8;
  uint8_t bytes[8];
  std::memcpy(bytes, &bits, 8);
  return hn::Or(codes, hn::IfThenElseZero(hn::LoadMaskBits(du8, bytes), hn::Set(du8, 16)));
}

// ---- vector loaders ---------------------------------------------------------------------------

template <class C>
struct VectorLoader {
  using None = void;  // no vector loader: the types below specialize it
};

// Q8_0: 8 blocks per unit; codes are the stored bytes + 128.
template <>
struct VectorLoader<gguf::Q8_0Codes> {
  const uint8_t* p = nullptr;
  void load(const uint8_t* unit, size_t) { p = unit; }
  void scales(VF& s, VF& o) const {
    s = gather_f16(p, 34);
    o = hn::Zero(DF());
  }
  VU8 chunk(size_t c) const {
    const DU8 du8;
    const DHalfU8 dh;
    const auto v = hn::Combine(du8, hn::LoadU(dh, p + (2 * c + 1) * 34 + 2), hn::LoadU(dh, p + 2 * c * 34 + 2));
    return hn::Xor(v, hn::Set(du8, 0x80));
  }
};

// Q4_0 and Q5_0: 8 blocks per unit, nibbles (and Q5_0's 32 fifth bits before them).
template <size_t kBytes, size_t kNibbles>
struct LegacyNibbleLoader {
  const uint8_t* p = nullptr;
  void load(const uint8_t* unit, size_t) { p = unit; }
  void scales(VF& s, VF& o) const {
    s = gather_f16(p, kBytes);
    o = hn::Zero(DF());
  }
  VU8 chunk(size_t c) const {
    const uint8_t *b0 = p + 2 * c * kBytes, *b1 = b0 + kBytes;
    const VU8 codes = nibble_pair(b0 + kNibbles, b1 + kNibbles);
    if constexpr (kNibbles == 2) return codes;
    uint32_t h0, h1;
    std::memcpy(&h0, b0 + 2, 4);
    std::memcpy(&h1, b1 + 2, 4);
    return add_fifth_bits(codes, h0 | uint64_t{h1} << 32);
  }
};
template <>
struct VectorLoader<gguf::Q4_0Codes> : LegacyNibbleLoader<18, 2> {};
template <>
struct VectorLoader<gguf::Q5_0Codes> : LegacyNibbleLoader<22, 6> {};
// IQ4_NL and IQ4_XS: nibbles as indices into the 16 non-uniform levels, one byte shuffle.
HWY_INLINE VU8 iq4_levels(VU8 nibbles) {
  return hn::TableLookupBytes(hn::LoadDup128(DU8(), gguf::kIq4Codes), nibbles);
}
// IQ4_NL: Q4_0's blocks.
template <>
struct VectorLoader<gguf::IQ4_NLCodes> : LegacyNibbleLoader<18, 2> {
  VU8 chunk(size_t c) const { return iq4_levels(LegacyNibbleLoader<18, 2>::chunk(c)); }
};
// IQ4_XS: one block per unit, 8 sub-blocks of 32 laid out as IQ4_NL's nibbles after 8 bytes of
// scales.
template <>
struct VectorLoader<gguf::IQ4_XSCodes> {
  const uint8_t* p = nullptr;
  void load(const uint8_t* unit, size_t) { p = unit; }
  void scales(VF& s, VF& o) const {
    HWY_ALIGN float scale[hn::MaxLanes(DF())] = {};
    gguf::IQ4_XSCodes::scales(p, scale);
    s = hn::Load(DF(), scale);
    o = hn::Zero(DF());
  }
  VU8 chunk(size_t c) const {
    const uint8_t* q = p + 8 + 32 * c;
    return iq4_levels(nibble_pair(q, q + 16));
  }
};

// Q4_K and Q5_K: chunk c is the low then the high nibbles of bytes 32c .. 32c + 31; Q5_K's fifth
// bit of element 32k + i is bit k of qh[i].
template <bool kFifthBit>
struct Q45_KLoader {
  const uint8_t* p = nullptr;
  VU8 qh;  // Q5_K: the 32 bytes of fifth bits, twice
  void load(const uint8_t* unit, size_t) {
    p = unit;
    if constexpr (kFifthBit) {
      const auto h = hn::LoadU(DHalfU8(), p + 16);
      qh = hn::Combine(DU8(), h, h);
    }
  }
  void scales(VF& s, VF& o) const {
    // scale_min_k4 for 4 sub-blocks at a time, on the 12 packed bytes as three words.
    uint32_t w[3];
    std::memcpy(w, p + 4, 12);
    const uint32_t scale_lo = w[0] & 0x3f3f3f3f, min_lo = w[1] & 0x3f3f3f3f;
    const uint32_t scale_hi = (w[2] & 0x0f0f0f0f) | ((w[0] >> 6) & 0x03030303) << 4;
    const uint32_t min_hi = ((w[2] >> 4) & 0x0f0f0f0f) | ((w[1] >> 6) & 0x03030303) << 4;
    const DF df;
    s = hn::Mul(eight_bytes(scale_lo | uint64_t{scale_hi} << 32), hn::Set(df, gguf::f16_at(p)));
    o = hn::Mul(eight_bytes(min_lo | uint64_t{min_hi} << 32), hn::Set(df, -gguf::f16_at(p + 2)));
  }
  VU8 chunk(size_t c) const {
    const DU8 du8;
    const DHalfU8 dh;
    const auto q = hn::LoadU(dh, p + (kFifthBit ? 48 : 16) + 32 * c);
    const VU8 codes = hn::Combine(du8, hn::ShiftRight<4>(q), hn::And(q, hn::Set(dh, 0x0f)));
    if constexpr (!kFifthBit) return codes;
    const auto bit = hn::Combine(du8, hn::Set(dh, static_cast<uint8_t>(2u << (2 * c))),
                                 hn::Set(dh, static_cast<uint8_t>(1u << (2 * c))));
    return hn::Or(codes, hn::IfThenElseZero(hn::TestBit(qh, bit), hn::Set(du8, 16)));
  }
};
template <>
struct VectorLoader<gguf::Q4_KCodes> : Q45_KLoader<false> {};
template <>
struct VectorLoader<gguf::Q5_KCodes> : Q45_KLoader<true> {};

// Q6_K: chunk 2h is the low nibbles of the 64 bytes of half h, chunk 2h + 1 their high nibbles;
// the two high bits come from the half's 32 bytes of qh: bits 0-1 (elements 0..31 of the
// chunk) and 2-3 (32..63) for chunk 2h, bits 4-5 and 6-7 for chunk 2h + 1.
template <>
struct VectorLoader<gguf::Q6_KCodes> {
  const uint8_t* p = nullptr;
  void load(const uint8_t* unit, size_t) { p = unit; }
  void scales(VF& s, VF& o) const {
    const DF df;
    const auto scales = hn::PromoteTo(DI32(), hn::LoadU(hn::Rebind<int8_t, DI32>(), reinterpret_cast<const int8_t*>(p + 192)));
    s = hn::Mul(hn::ConvertTo(df, scales), hn::Set(df, gguf::f16_at(p + 208)));
    o = hn::Zero(df);
  }
  VU8 chunk(size_t c) const {
    const DU8 du8;
    const size_t half = c / 2;
    const VU8 low = hn::LoadU(du8, p + 64 * half);
    const auto h = hn::LoadU(DHalfU8(), p + 128 + 32 * half);
    VU8 high = hn::Combine(du8, hn::ShiftRight<2>(h), h);
    const VU8 nibbles = c % 2 ? hn::ShiftRight<4>(low) : hn::And(low, hn::Set(du8, 0x0f));
    if (c % 2) high = hn::ShiftRight<4>(high);
    return hn::Or(nibbles, hn::ShiftLeft<4>(hn::And(high, hn::Set(du8, 3))));
  }
};

// The loader of full units of format C.
template <class C>
using FastLoader = std::conditional_t<kWide && !requires { typename VectorLoader<C>::None; },
                                      VectorLoader<C>, UnitLoader<C>>;

// Writes what a vector loader holds into u.
template <class L>
HWY_INLINE void write_unit(const L& l, Unit& u) {
  if constexpr (requires { l.unit; }) {
    u = l.unit;
  } else {
    VF s, o;
    l.scales(s, o);
    hn::Store(s, DF(), u.scale);
    hn::Store(o, DF(), u.offset);
    for (size_t c = 0; c < kUnit / hn::Lanes(DU8()); ++c) hn::Store(l.chunk(c), DU8(), u.code + c * hn::Lanes(DU8()));
  }
}

}  // namespace veloxquant::runtime::kernels
