#include "runtime/weights/int8_kernels.h"

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "runtime/weights/int8_loaders.h"

namespace veloxquant::runtime::kernels {
namespace {

// acc plus, in each 32-bit lane, the sum of the four products of its bytes: u unsigned, s signed.
// With AVX-512 VNNI one instruction (vpdpbusd); elsewhere the even and odd bytes widened to 16 bits
// and multiplied pairwise, the same exact sum.
HWY_INLINE VI32 dot_quads(hn::Vec<DU8> u, hn::Vec<DI8> s, VI32 acc) {
#if HWY_TARGET <= HWY_AVX3 && defined(__AVX512VNNI__)  // an AVX-512 target, and VNNI
  if constexpr (hn::MaxLanes(DI32()) == 16) return VI32{_mm512_dpbusd_epi32(acc.raw, u.raw, s.raw)};
#endif
  const DI32 di32;
  const hn::Repartition<int16_t, DI32> di16;
  const hn::Repartition<uint16_t, DI32> du16;
  const auto u16 = hn::BitCast(du16, u);
  const auto s16 = hn::BitCast(di16, s);
  auto odd = hn::Zero(di32);
  auto even = hn::ReorderWidenMulAccumulate(di32, hn::BitCast(di16, hn::And(u16, hn::Set(du16, 0xff))),
                                            hn::ShiftRight<8>(hn::ShiftLeft<8>(s16)), hn::Zero(di32), odd);
  even = hn::ReorderWidenMulAccumulate(di32, hn::BitCast(di16, hn::ShiftRight<8>(u16)),
                                       hn::ShiftRight<8>(s16), even, odd);
  return hn::Add(acc, hn::RearrangeToOddPlusEven(even, odd));
}

// ---- few tokens: vectors along the row --------------------------------------------------------

using Indices = decltype(hn::SetTableIndices(DF(), static_cast<const int32_t*>(nullptr)));

// Lane j of chunk c of a unit holds codes c * chunk + 4j .. + 3, of group (c * chunk + 4j) / kGroup.
// pick[c] picks that group's lane out of a vector of the unit's per-group scales (wide targets)
// or out of a window of them starting at the chunk's first group (narrow ones).
template <class C>
struct ChunkGroups {
  Indices pick[kUnit / 4];
  ChunkGroups() {
    const size_t lanes = hn::Lanes(DI32()), chunk = 4 * lanes;
    for (size_t c = 0; c < kUnit / chunk; ++c) {
      HWY_ALIGN int32_t idx[16];
      for (size_t j = 0; j < lanes; ++j) {
        const size_t first = kWide ? c * chunk : (c * chunk) % C::kGroup;
        idx[j] = static_cast<int32_t>((first + 4 * j) / C::kGroup);
      }
      pick[c] = hn::SetTableIndices(DF(), idx);
    }
  }
};

// acc[i][t] += unit u of row i . the same elements of token t0 + t, for R rows through their
// loaders and T tokens. Per chunk, lane by lane: the exact integer sum of 4 products (the code
// offset's share starts it, quad_start), times its group's weight scale and the token's
// activation scale; per group, the offset times the token's scaled code sum. Every (row, token)
// sum takes the same steps whatever R and T are.
template <class C, size_t R, size_t T, class L>
HWY_INLINE void dot_unit(const L (&rows)[R], const QuantizedActivations& a, size_t t0, size_t u,
                         const Indices* pick, VF (&acc)[R][T]) {
  const DF df;
  const DI32 di32;
  const DI8 di8;
  const size_t lanes = hn::Lanes(di32), chunk = 4 * lanes;
  const int8_t* xq[T];
  const int32_t* quads[T];
  const float *dy[T], *ds[T];
  for (size_t t = 0; t < T; ++t) {
    xq[t] = a.codes_of(t0 + t) + u * kUnit;
    quads[t] = a.quad_start_of(t0 + t) + u * kUnit / 4;
    dy[t] = a.scale_of(t0 + t) + u * kUnitGroups<C>;
    ds[t] = a.scaled_sum_of(t0 + t) + u * kUnitGroups<C>;
  }
  for (size_t i = 0; i < R; ++i) {
    VF sd[T], offset;
    HWY_ALIGN float window[kWide ? 1 : T][32] = {};
    if constexpr (kWide) {
      VF scale;
      rows[i].scales(scale, offset);
      for (size_t t = 0; t < T; ++t) sd[t] = hn::Mul(scale, hn::LoadU(df, dy[t]));
    } else {
      for (size_t t = 0; t < T; ++t)
        for (size_t g = 0; g < kUnitGroups<C>; g += lanes)
          hn::Store(hn::Mul(hn::Load(df, rows[i].unit.scale + g), hn::LoadU(df, dy[t] + g)), df, window[t] + g);
    }
    for (size_t c = 0; c < kUnit / chunk; ++c) {
      const VU8 codes = rows[i].chunk(c);
      for (size_t t = 0; t < T; ++t) {
        VI32 sum = C::kCodeOffset ? hn::LoadU(di32, quads[t] + c * lanes) : hn::Zero(di32);
        sum = dot_quads(codes, hn::LoadU(di8, xq[t] + c * chunk), sum);
        VF scale;
        if constexpr (kWide) scale = hn::TableLookupLanes(sd[t], pick[c]);
        else scale = hn::TableLookupLanes(hn::LoadU(df, window[t] + c * chunk / C::kGroup), pick[c]);
        acc[i][t] = hn::MulAdd(hn::ConvertTo(df, sum), scale, acc[i][t]);
      }
    }
    if constexpr (C::kHasMin) {
      for (size_t t = 0; t < T; ++t) {
        if constexpr (kWide) {
          // Lanes past the unit's groups hold the next token's values: zero offsets there would
          // not stop a NaN of that token, so they are not loaded.
          const auto own = hn::FirstN(df, kUnitGroups<C>);
          acc[i][t] = hn::MulAdd(offset, hn::MaskedLoad(own, df, ds[t]), acc[i][t]);
        } else {
          for (size_t g = 0; g < kUnitGroups<C>; g += lanes)
            acc[i][t] = hn::MulAdd(hn::Load(df, rows[i].unit.offset + g), hn::LoadU(df, ds[t] + g), acc[i][t]);
        }
      }
    }
  }
}

// y[t * ldy + i] = row_i . x_{t0 + t} for R rows (1 or 4) and T tokens (1 or 4), stored for the
// first nt tokens. Full units through the format's fast loader, a partial last one (legacy
// types, cols not a multiple of kUnit) through the scalar unpack.
template <class C, size_t R, size_t T>
void dot_tile(const uint8_t* w, size_t row_bytes, size_t cols, const QuantizedActivations& a,
              size_t t0, size_t nt, float* y, size_t ldy) {
  static const ChunkGroups<C> groups;
  const DF df;
  VF acc[R][T];
  for (size_t i = 0; i < R; ++i)
    for (size_t t = 0; t < T; ++t) acc[i][t] = hn::Zero(df);
  const size_t full = cols / kUnit;
  {
    FastLoader<C> rows[R];
    for (size_t u = 0; u < full; ++u) {
      for (size_t i = 0; i < R; ++i) {
        const uint8_t* unit = w + i * row_bytes + u * kUnitBytes<C>;
        // The same unit of the next R rows, a tile ahead: a group of rows spans only a few KB,
        // too short a stream for the hardware prefetcher to run ahead of it on its own.
        for (size_t line = 0; line < kUnitBytes<C>; line += 64) hwy::Prefetch(unit + R * row_bytes + line);
        rows[i].load(unit, kUnit);
      }
      dot_unit<C, R, T>(rows, a, t0, u, groups.pick, acc);
    }
  }
  if (cols % kUnit) {
    UnitLoader<C> rows[R];
    for (size_t i = 0; i < R; ++i) rows[i].load(w + i * row_bytes + full * kUnitBytes<C>, cols % kUnit);
    dot_unit<C, R, T>(rows, a, t0, full, groups.pick, acc);
  }
  store_row_sums(df, acc, nt, y, ldy);
}

// Rows in groups of 4, tokens in groups of 4 (the tail group runs on the zero tokens that pad
// the activations, and stores only the real ones), a single token on its own.
template <class C>
void dot_rows_of(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                 const QuantizedActivations& a, size_t ntokens, float* y, size_t ldy) {
  static_assert(kActivationTokenPad % 4 == 0);
  for (size_t t = 0; t < ntokens; t += 4) {
    const size_t nt = std::min<size_t>(4, ntokens - t);
    float* yt = y + t * ldy;
    size_t r = 0;
    if (ntokens == 1) {
      for (; r + 4 <= nrows; r += 4) dot_tile<C, 4, 1>(w + r * row_bytes, row_bytes, cols, a, t, nt, yt + r, ldy);
      for (; r < nrows; ++r) dot_tile<C, 1, 1>(w + r * row_bytes, row_bytes, cols, a, t, nt, yt + r, ldy);
    } else {
      for (; r + 4 <= nrows; r += 4) dot_tile<C, 4, 4>(w + r * row_bytes, row_bytes, cols, a, t, nt, yt + r, ldy);
      for (; r < nrows; ++r) dot_tile<C, 1, 4>(w + r * row_bytes, row_bytes, cols, a, t, nt, yt + r, ldy);
    }
  }
}

// ---- many tokens: lanes across rows -----------------------------------------------------------

// 8 tokens x (sums + accumulators) of 16 rows: 16 registers. A tile of the activations' kTiles
// layout.
constexpr size_t kTileTokens = kActivationTokenPad;
static_assert(kTileTokens == 8);

// A panel: up to Lanes(DI32) rows, transposed so that one vector holds 4 consecutive codes of
// every row (quad q of row r at code[q * lanes + r]), and the scales and offsets of each group of
// every row side by side. Lanes past the panel's rows hold whatever an earlier panel left: their
// sums are computed and never stored.
struct Panel {
  // Vector-aligned storage that only grows.
  template <class T>
  struct Buffer {
    hwy::AlignedFreeUniquePtr<T[]> data;
    size_t size = 0;
    T* get(size_t n) {
      if (n > size) {
        data = hwy::AllocateAligned<T>(n);
        size = n;
      }
      return data.get();
    }
  };
  Buffer<uint32_t> code_buffer;
  Buffer<float> scale_buffer, offset_buffer;
  uint32_t* code = nullptr;
  float *scale = nullptr, *offset = nullptr;
};

template <class C>
void pack_panel(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols, size_t lanes, Panel& p) {
  const size_t units = (cols + kUnit - 1) / kUnit;
  p.code = p.code_buffer.get(units * kUnit / 4 * lanes);
  p.scale = p.scale_buffer.get(units * kUnitGroups<C> * lanes);
  p.offset = p.offset_buffer.get(units * kUnitGroups<C> * lanes);
  Unit unit;
  for (size_t r = 0; r < nrows; ++r) {
    for (size_t u = 0; u < units; ++u) {
      const uint8_t* at = w + r * row_bytes + u * kUnitBytes<C>;
      if ((u + 1) * kUnit <= cols) {
        FastLoader<C> l;
        l.load(at, kUnit);
        write_unit(l, unit);
      } else {
        UnitLoader<C> l;
        l.load(at, cols - u * kUnit);
        write_unit(l, unit);
      }
      uint32_t* code = p.code + u * kUnit / 4 * lanes + r;
      for (size_t q = 0; q < kUnit / 4; ++q) std::memcpy(code + q * lanes, unit.code + 4 * q, 4);
      for (size_t g = 0; g < kUnitGroups<C>; ++g) {
        p.scale[(u * kUnitGroups<C> + g) * lanes + r] = unit.scale[g];
        p.offset[(u * kUnitGroups<C> + g) * lanes + r] = unit.offset[g];
      }
    }
  }
}

// Y rows [t0, t0 + nt) of the panel's rows: for every group, each token's exact integer sums of
// all rows at once (vpdpbusd of a vector of codes with the token's 4 codes broadcast), then its
// scale and offset. cols elements, a whole number of units in the panel.
template <class C>
void panel_tile(const Panel& p, size_t groups, size_t lanes, const QuantizedActivations& a,
                size_t t0, size_t nt, size_t nrows, float* y, size_t ldy) {
  const DF df;
  const DI32 di32;
  const DU8 du8;
  const DI8 di8;
  // The tile's layout (ActivationLayout::kTiles): quad q of token t at xq + (q * 8 + t) * 4, the
  // values of group g of token t at [g * 8 + t].
  const int8_t* xq = a.codes.data() + a.code_index(t0, 0);
  const float* dy = a.scale.data() + a.group_index(t0, 0);
  const float* ds = a.scaled_sum.data() + a.group_index(t0, 0);
  const int32_t* start = a.group_start.data() + a.group_index(t0, 0);
  VF acc[kTileTokens];
  for (size_t t = 0; t < kTileTokens; ++t) acc[t] = hn::Zero(df);
  constexpr size_t kQuads = C::kGroup / 4;
  for (size_t g = 0; g < groups; ++g, xq += kQuads * kTileTokens * 4) {
    VI32 sum[kTileTokens];
#pragma GCC unroll 8
    for (size_t t = 0; t < kTileTokens; ++t)
      sum[t] = C::kCodeOffset ? hn::Set(di32, start[g * kTileTokens + t]) : hn::Zero(di32);
#pragma GCC unroll 8
    for (size_t k = 0; k < kQuads; ++k) {
      const auto codes = hn::BitCast(du8, hn::Load(hn::RebindToUnsigned<DI32>(), p.code + (g * kQuads + k) * lanes));
#pragma GCC unroll 8
      for (size_t t = 0; t < kTileTokens; ++t) {
        int32_t quad;
        std::memcpy(&quad, xq + (k * kTileTokens + t) * 4, 4);
        sum[t] = dot_quads(codes, hn::BitCast(di8, hn::Set(di32, quad)), sum[t]);
      }
    }
    const VF scale = hn::Load(df, p.scale + g * lanes);
#pragma GCC unroll 8
    for (size_t t = 0; t < kTileTokens; ++t) {
      acc[t] = hn::MulAdd(scale, hn::Mul(hn::ConvertTo(df, sum[t]), hn::Set(df, dy[g * kTileTokens + t])), acc[t]);
      if constexpr (C::kHasMin)
        acc[t] = hn::MulAdd(hn::Load(df, p.offset + g * lanes), hn::Set(df, ds[g * kTileTokens + t]), acc[t]);
    }
  }
  for (size_t t = 0; t < nt; ++t) {
    if (nrows == lanes) hn::StoreU(acc[t], df, y + t * ldy);
    else hn::BlendedStore(acc[t], hn::FirstN(df, nrows), df, y + t * ldy);
  }
}

template <class C>
void gemm_rows_of(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                  const QuantizedActivations& a, size_t ntokens, float* y, size_t ldy) {
  const size_t lanes = hn::Lanes(DI32());
  const size_t groups = (cols + kUnit - 1) / kUnit * kUnitGroups<C>;
  // Grows once per thread to the largest matrix seen, then is reused by every call.
  thread_local Panel panel;
  for (size_t r = 0; r < nrows; r += lanes) {
    const size_t m = std::min(lanes, nrows - r);
    pack_panel<C>(w + r * row_bytes, row_bytes, m, cols, lanes, panel);
    for (size_t t = 0; t < ntokens; t += kTileTokens)
      panel_tile<C>(panel, groups, lanes, a, t, std::min(kTileTokens, ntokens - t), m, y + t * ldy + r, ldy);
  }
}

template <class C>
QuantKernels kernels_of() {
  return {C::kGroup,      C::kCodeOffset,  C::kElements == 256 ? kQ8KBlocks : kQ8Blocks,
          dot_rows_of<C>, gemm_rows_of<C>, hn::Lanes(DI32())};
}

}  // namespace

const QuantKernels* quant_kernels(GgmlType type) {
  const QuantKernels* k = nullptr;
  gguf::with_block_codes(type, [&](auto codes) {
    static const QuantKernels table = kernels_of<decltype(codes)>();
    k = &table;
  });
  return k;
}

}  // namespace veloxquant::runtime::kernels
