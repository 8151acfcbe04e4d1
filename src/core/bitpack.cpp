#include "core/bitpack.h"

#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace veloxquant {
namespace hn = hwy::HWY_NAMESPACE;
namespace {

// B = 1, 2, 4 or 8 bits: emit(i, v) with the codes [i, i + N) as 32-bit lanes, for every whole
// vector of N codes; returns the codes emitted. Below 8 bits a vector's codes span at most 64 bits
// (512-bit vectors of 4-bit codes), read as one scalar and spread over the lanes: lane i takes
// 32-bit word i*B/32, shifted right by i*B mod 32 and masked. (Going through a buffer in memory
// instead stalls every vector: a wide load does not forward from the narrower store before it.)
template <unsigned B, class D, class Emit>
size_t for_code_vectors(D du, const uint8_t* in, size_t n, Emit emit) {
  const hn::Repartition<uint64_t, D> dw;
  const size_t N = hn::Lanes(du), bytes = N * B / 8;
  if (N * B % 8 != 0 || (B < 8 && bytes > sizeof(uint64_t))) return 0;
  const auto lane = hn::Iota(du, 0);
  const auto index = hn::IndicesFromVec(du, hn::ShiftRight<5>(hn::Mul(lane, hn::Set(du, B))));
  const auto shift = hn::And(hn::Mul(lane, hn::Set(du, B)), hn::Set(du, 31));
  const auto mask = hn::Set(du, (1u << B) - 1u);
  size_t i = 0;
  for (; i + N <= n; i += N, in += bytes) {
    if constexpr (B == 8) {
      emit(i, hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint8_t, D>(), in)));
    } else {
      uint64_t word = 0;
      std::memcpy(&word, in, bytes);
      const auto spread = hn::TableLookupLanes(hn::BitCast(du, hn::Set(dw, word)), index);
      emit(i, hn::And(spread >> shift, mask));
    }
  }
  return i;
}

template <class D, class Emit>
size_t for_code_vectors(D du, const uint8_t* in, size_t n, unsigned bits, Emit emit) {
  switch (bits) {
    case 1: return for_code_vectors<1>(du, in, n, emit);
    case 2: return for_code_vectors<2>(du, in, n, emit);
    case 4: return for_code_vectors<4>(du, in, n, emit);
    case 8: return for_code_vectors<8>(du, in, n, emit);
    default: return 0;
  }
}

// Any width, code by code through an accumulator: put(i, code) for each.
template <typename Put>
void unpack_stream(const uint8_t* packed, size_t n, unsigned bits, Put put) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t acc = 0;
  unsigned avail = 0;
  size_t in = 0;
  for (size_t i = 0; i < n; ++i) {
    if (avail < bits) {
      acc |= static_cast<uint32_t>(packed[in++]) << avail;
      avail += 8;
    }
    put(i, acc & mask);
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
  const hn::ScalableTag<int32_t> di;
  const hn::RebindToUnsigned<decltype(di)> du;
  const size_t done = for_code_vectors(du, packed, n, bits, [&](size_t i, auto v) {
    hn::StoreU(hn::DemoteTo(hn::Rebind<uint8_t, decltype(di)>(), hn::BitCast(di, v)),
               hn::Rebind<uint8_t, decltype(di)>(), codes + i);
  });
  unpack_stream(packed + done * bits / 8, n - done, bits,
                [&](size_t i, uint32_t code) { codes[done + i] = static_cast<uint8_t>(code); });
}

void unpack_affine_f32(const uint8_t* packed, size_t n, unsigned bits, float min, float step, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const auto vmin = hn::Set(df, min), vstep = hn::Set(df, step);
  const size_t done =
      for_code_vectors(hn::RebindToUnsigned<decltype(df)>(), packed, n, bits, [&](size_t i, auto v) {
        hn::StoreU(hn::MulAdd(hn::ConvertTo(df, hn::BitCast(di, v)), vstep, vmin), df, out + i);
      });
  // The rest code by code, from the byte where the vectors stopped (they end on a byte); the
  // same fused multiply-add as the vectors, so a code's value does not depend on its position.
  unpack_stream(packed + done * bits / 8, n - done, bits, [&](size_t i, uint32_t code) {
    out[done + i] = std::fma(static_cast<float>(code), step, min);
  });
}

void unpack_table_f32(const uint8_t* packed, size_t n, unsigned bits, const float* table, float scale,
                      float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t N = hn::Lanes(df), entries = size_t{1} << bits;
  size_t done = 0;
  if (entries <= 2 * N) {  // the table in one or two vectors, looked up per lane
    HWY_ALIGN float lo[hn::MaxLanes(df)] = {}, hi[hn::MaxLanes(df)] = {};
    std::copy_n(table, std::min(entries, N), lo);
    if (entries > N) std::copy_n(table + N, entries - N, hi);
    const auto tlo = hn::Load(df, lo), thi = hn::Load(df, hi), vscale = hn::Set(df, scale);
    const auto last_low = hn::Set(du, static_cast<uint32_t>(N - 1));  // N is a power of two
    done = for_code_vectors(du, packed, n, bits, [&](size_t i, auto codes) {
      const auto within = hn::IndicesFromVec(df, hn::BitCast(di, hn::And(codes, last_low)));
      auto v = hn::TableLookupLanes(tlo, within);
      if (entries > N)
        v = hn::IfThenElse(hn::RebindMask(df, codes > last_low), hn::TableLookupLanes(thi, within), v);
      hn::StoreU(hn::Mul(v, vscale), df, out + i);
    });
  }
  unpack_stream(packed + done * bits / 8, n - done, bits,
                [&](size_t i, uint32_t code) { out[done + i] = scale * table[code]; });
}

void unpack_bits_f32(const uint8_t* packed, size_t n, unsigned bits, float* out) {
  unpack_affine_f32(packed, n, bits, 0.0f, 1.0f, out);
}

}  // namespace veloxquant
