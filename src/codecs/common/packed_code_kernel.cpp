#include "codecs/common/packed_code_kernel.h"

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "core/bitpack.h"
#include "core/prefetch.h"
#include "core/sum_lanes4.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace hn = hwy::HWY_NAMESPACE;

namespace {
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DU8 = hn::Rebind<uint8_t, DU>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// Vectors per accumulate tile: 4 queries x 4 vectors of sums stay in registers over all tokens.
constexpr size_t kTile = 4;
// Tokens per block: their codes (about 17 KiB at 4 bits, d = 128) stay in L1 while every tile
// of the accumulate loop passes over them.
constexpr size_t kBlockTokens = 256;
constexpr size_t kMaxQueries = 4;

size_t lanes() { return hn::Lanes(DF()); }

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Everything the inner loops need, fixed for one call.
struct Loop {
  const uint8_t* codes;  // first row of the block
  size_t stride;         // bytes between rows of `codes`
  size_t vectors;        // SIMD vectors per row, a multiple of K
  const float* table;
  const uint8_t* scales;  // f32 multiplier of the block's first row, then every record_stride
  size_t record_stride;
  float factor;
  // Rows from `codes` on that lie in the caller's records (this block's and the next ones'), which
  // the loops may prefetch; 0 when the block is a scratch copy.
  size_t rows_ahead;
};

// Rows a loop asks for before it reads them: about 2 KiB of 4-bit records, the distance that
// keeps memory busy while the rows before them are worked on.
constexpr size_t kPrefetchRows = 32;

// The loop over the block of records from t0 on whose rows view_block() gave: in place, or a
// scratch copy (not prefetched).
Loop block_loop(const uint8_t* codes, size_t stride, size_t vectors, const float* table,
                const uint8_t* records, size_t n, size_t t0, const RecordFormat& f, float factor) {
  const bool in_place = codes == records + t0 * f.stride + f.code_offset;
  return {codes,
          stride,
          vectors,
          table,
          records + t0 * f.stride + f.scale_offset,
          f.stride,
          factor,
          in_place ? n - t0 : 0};
}

HWY_INLINE float row_scale(const Loop& L, size_t t) {
  return L.factor * load_f32(L.scales + t * L.record_stride);
}

// How a row's codes are laid out for the SIMD loop, by the code width B it is compiled for:
//  - B = 1, 2, 4, 8: pack_bits bytes, K = 8 / B codes per byte. One load of N bytes widened to
//    N lanes yields K vectors of codes by shift and mask ("byte-major" kernel order).
//  - B = 3, 5, 6, 7: pack_bits bytes, natural order. N codes are N * B / 8 whole bytes (N >= 8);
//    a byte shuffle puts the two bytes holding each code in its lane, a per-lane shift aligns it.
// Narrower vectors unpack rows of 3, 5, 6 or 7 bits to one byte per code and use B = 8.
template <unsigned B>
constexpr unsigned kCodesPerByte = 8 % B == 0 ? 8 / B : 1;
template <unsigned B>
constexpr bool kStrided = 8 % B != 0;
// Tables up to one vector long are permuted in registers; longer ones are gathered.
template <unsigned B>
constexpr bool kGather = (size_t{1} << B) > hn::MaxLanes(DF());

using DB = hn::Repartition<uint8_t, DU>;  // the bytes of a u32 vector
struct StridedLanes {
  hn::Vec<DB> byte_index;  // per lane: its two code bytes, then two zeroing indices
  VU shift;                // per lane: the code's bit offset inside its first byte
};
template <unsigned B>
HWY_INLINE StridedLanes strided_lanes() {
  const DU du;
  const VU bit = hn::Mul(hn::Iota(du, 0), hn::Set(du, B));
  const VU byte = hn::ShiftRight<3>(bit);
  const VU index = hn::Or(hn::Or(byte, hn::ShiftLeft<8>(hn::Add(byte, hn::Set(du, 1)))),
                          hn::Set(du, 0x80800000u));
  return {hn::BitCast(DB(), index), hn::And(bit, hn::Set(du, 7))};
}

// Chunk g of a row, one code (strided) or one byte (the others) per u32 lane.
template <unsigned B>
HWY_INLINE VU load_chunk(const uint8_t* row, size_t g, const StridedLanes& lanes) {
  const DU du;
  const size_t N = hn::Lanes(du);
  if constexpr (kStrided<B>) {
    const auto bytes = hn::LoadDup128(DB(), row + g * (N * B / 8));
    const VU pair = hn::BitCast(du, hn::TableLookupBytesOr0(bytes, lanes.byte_index));
    return hn::And(pair >> lanes.shift, hn::Set(du, (1u << B) - 1));
  } else {
    return hn::PromoteTo(du, hn::LoadU(DU8(), row + g * N));
  }
}

// Codes of sub-vector S of a chunk laid out with K codes per byte (bits = 8 / K). Bytes are
// below 256, so the top sub-vector needs no mask.
template <unsigned K, unsigned S>
HWY_INLINE VU sub_codes(VU bytes) {
  constexpr int kBits = 8 / K, kShift = static_cast<int>(S) * kBits;
  const VU shifted = [&] {
    if constexpr (kShift == 0) return bytes;
    else return hn::ShiftRight<kShift>(bytes);
  }();
  if constexpr (kShift + kBits >= 8) {
    return shifted;
  } else {
    return hn::And(shifted, hn::Set(DU(), (1u << kBits) - 1));
  }
}
// Same with the sub-vector known only at run time.
template <unsigned K>
HWY_INLINE VU sub_codes(VU bytes, unsigned s) {
  constexpr unsigned kBits = 8 / K;
  const VU shifted = hn::ShiftRightSame(bytes, static_cast<int>(s * kBits));
  if constexpr (K == 1) return shifted;
  else return hn::And(shifted, hn::Set(DU(), (1u << kBits) - 1));
}

template <unsigned K, class F, unsigned... S>
HWY_INLINE void for_each_sub(F&& f, std::integer_sequence<unsigned, S...>) {
  (f(std::integral_constant<unsigned, S>{}), ...);
}
// Calls f(integral_constant<unsigned, S>) for S = 0 .. K-1, unrolled.
template <unsigned K, class F>
HWY_INLINE void for_each_sub(F&& f) {
  for_each_sub<K>(f, std::make_integer_sequence<unsigned, K>{});
}

// Table entries at the codes: one in-register permute when the table fits in a vector, else a
// gather from memory.
template <bool kFromMemory>
HWY_INLINE VF lookup(VF table_vec, const float* table, VU code) {
  const DF df;
  const DI di;
  if constexpr (kFromMemory) {
    return hn::GatherIndex(df, table, hn::BitCast(di, code));
  } else {
    return hn::TableLookupLanes(table_vec, hn::IndicesFromVec(df, hn::BitCast(di, code)));
  }
}

// A SignTerm for one block of rows and up to kMaxQueries queries.
struct SignLoop {
  const uint8_t* bits;  // sign bits of the block's first row, pack_bits order
  size_t stride;
  size_t vectors;       // SIMD vectors of coordinates, natural order
  const float* sketch;  // 2 (S q)_i in natural order, zero-padded, [M, positions]
  size_t positions;
  const float* totals;
  const uint8_t* rhos;  // f32 rho of the block's first row, then every record_stride
  size_t record_stride;
  float factor;
};

// Sign bits of coordinates v * N .. v * N + N - 1 as a lane mask, loaded straight from the row.
HWY_INLINE hn::Mask<DF> sign_mask(const uint8_t* row, size_t v) {
  const DF df;
  const size_t bit = v * hn::Lanes(df);
  if (bit % 8 == 0) return hn::LoadMaskBits(df, row + bit / 8);
  const uint8_t part = static_cast<uint8_t>(row[bit / 8] >> (bit % 8));  // vectors under 8 lanes
  return hn::LoadMaskBits(df, &part);
}

// acc[r][i] += factor * rho_r * sum_c sketch_i[c] * z_r[c] over the sign bits z_r of row at[r]:
// one masked FMA per vector, adding sketch_i only where the bit is set.
template <size_t M, size_t kRows>
HWY_INLINE void add_sign_bits(const SignLoop& S, const size_t* at, VF (*acc)[4]) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const uint8_t* row[kRows];
  VF w[kRows];
  for (size_t r = 0; r < kRows; ++r) {
    row[r] = S.bits + at[r] * S.stride;
    w[r] = hn::Set(df, S.factor * load_f32(S.rhos + at[r] * S.record_stride));
  }
  for (size_t v = 0; v < S.vectors; ++v) {
    hn::Mask<DF> set[kRows];
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) set[r] = sign_mask(row[r], v);
#pragma GCC unroll 4
    for (size_t i = 0; i < M; ++i) {
      const VF si = hn::LoadU(df, S.sketch + i * S.positions + v * N);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r)
        acc[r][i] = hn::IfThenElse(set[r], hn::MulAdd(si, w[r], acc[r][i]), acc[r][i]);
    }
  }
}

// scores[i][t] = scale_t * sum over positions of qk_i * table[code_t], plus the sign term when
// S is given. Several rows at a time share every query load, and their M x kRows independent
// sums keep the FMA pipes busy (4 rows with 32 vector registers, 2 with 16).
template <unsigned B, size_t M>
void dot_rows(const Loop& L, const SignLoop* S, size_t rows, const float* qk, size_t positions,
              float* const* out) {
  constexpr unsigned K = kCodesPerByte<B>;
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF table_vec = hn::LoadU(df, L.table);
  const StridedLanes lanes = strided_lanes<B>();
  const size_t chunks = L.vectors / K;
  constexpr size_t kRows = hn::MaxLanes(DF()) >= 16 ? 4 : 2;
  for (size_t t = 0; t < rows; t += kRows) {
    if (t + kPrefetchRows + kRows <= L.rows_ahead)
      prefetch_range(L.codes + (t + kPrefetchRows) * L.stride, kRows * L.stride);
    const size_t live = std::min(kRows, rows - t);
    // Past the last row, the last row is repeated and its duplicate sums are discarded.
    size_t at[kRows];
    const uint8_t* row[kRows];
    for (size_t r = 0; r < kRows; ++r) {
      at[r] = t + std::min(r, live - 1);
      row[r] = L.codes + at[r] * L.stride;
    }
    VF acc[kRows][4];
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t i = 0; i < 4; ++i) acc[r][i] = hn::Zero(df);
    for (size_t g = 0; g < chunks; ++g) {
      VU bytes[kRows];
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) bytes[r] = load_chunk<B>(row[r], g, lanes);
      for_each_sub<K>([&](auto sub) {
        constexpr unsigned kSub = decltype(sub)::value;
        const float* qv = qk + (g * K + kSub) * N;
        VF x[kRows];
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r)
          x[r] = lookup<kGather<B>>(table_vec, L.table, sub_codes<K, kSub>(bytes[r]));
#pragma GCC unroll 4
        for (size_t i = 0; i < M; ++i) {
          const VF qi = hn::LoadU(df, qv + i * positions);
#pragma GCC unroll 4
          for (size_t r = 0; r < kRows; ++r) acc[r][i] = hn::MulAdd(x[r], qi, acc[r][i]);
        }
      });
    }
    // Scaled before the sign sums join them, so one reduction per row serves both terms.
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) {
      const VF scale = hn::Set(df, row_scale(L, at[r]));
#pragma GCC unroll 4
      for (size_t i = 0; i < M; ++i) acc[r][i] = hn::Mul(acc[r][i], scale);
    }
    if (S) add_sign_bits<M, kRows>(*S, at, acc);
    for (size_t r = 0; r < live; ++r) {
      float s[4];
      simd::sum_lanes4(DF(), acc[r], s);
      if (S) {
        const float w = S->factor * load_f32(S->rhos + (t + r) * S->record_stride);
        for (size_t i = 0; i < M; ++i) s[i] -= w * S->totals[i];
      }
      for (size_t i = 0; i < M; ++i) out[i][t + r] = s[i];
    }
  }
}

// x[u] = the table entries of vectors v0 .. v0 + kTile - 1 of a row.
template <unsigned B>
HWY_INLINE void decode_tile(const uint8_t* row, size_t v0, VF table_vec, const float* table,
                            const StridedLanes& lanes, VF* x) {
  constexpr unsigned K = kCodesPerByte<B>;
  if constexpr (K <= kTile) {
    // The tile is whole chunks: every sub-vector index is a compile-time constant.
    for (size_t c = 0; c < kTile / K; ++c) {
      const VU bytes = load_chunk<B>(row, v0 / K + c, lanes);
      for_each_sub<K>([&](auto sub) {
        constexpr unsigned kSub = decltype(sub)::value;
        x[c * K + kSub] = lookup<kGather<B>>(table_vec, table, sub_codes<K, kSub>(bytes));
      });
    }
  } else {
    // The tile is part of one chunk (8 codes per byte): sub-vectors from v0 % K on.
    const VU bytes = load_chunk<B>(row, v0 / K, lanes);
    for (size_t u = 0; u < kTile; ++u)
      x[u] = lookup<kGather<B>>(table_vec, table, sub_codes<K>(bytes, static_cast<unsigned>(v0 % K + u)));
  }
}

// acck_i += sum_t w_i[t] * table[code_t], one tile of kTile vectors at a time so the M x kTile
// sums stay in registers across the rows.
template <unsigned B, size_t M>
void accumulate_rows(const Loop& L, size_t rows, const float* w, float* acck, size_t positions) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF table_vec = hn::LoadU(df, L.table);
  const StridedLanes lanes = strided_lanes<B>();
  for (size_t v0 = 0; v0 < L.vectors; v0 += kTile) {
    VF acc[M][kTile];
#pragma GCC unroll 4
    for (size_t i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (size_t u = 0; u < kTile; ++u) acc[i][u] = hn::LoadU(df, acck + i * positions + (v0 + u) * N);
    for (size_t t = 0; t < rows; ++t) {
      // The first tile's pass reads each row from memory; the later ones find it in cache.
      if (v0 == 0 && t + kPrefetchRows < L.rows_ahead)
        prefetch_range(L.codes + (t + kPrefetchRows) * L.stride, L.stride);
      VF x[kTile];
      decode_tile<B>(L.codes + t * L.stride, v0, table_vec, L.table, lanes, x);
#pragma GCC unroll 4
      for (size_t i = 0; i < M; ++i) {
        const VF wt = hn::Set(df, w[i * rows + t]);
#pragma GCC unroll 4
        for (size_t u = 0; u < kTile; ++u) acc[i][u] = hn::MulAdd(x[u], wt, acc[i][u]);
      }
    }
#pragma GCC unroll 4
    for (size_t i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (size_t u = 0; u < kTile; ++u) hn::StoreU(acc[i][u], df, acck + i * positions + (v0 + u) * N);
  }
}

// Runtime (layout bits, query count) -> one instantiation.
template <template <unsigned, size_t> class Fn, typename... Args>
void dispatch(unsigned bits, size_t m, Args&&... args) {
  auto by_m = [&](auto bc) {
    constexpr unsigned kB = decltype(bc)::value;
    switch (m) {
      case 1: Fn<kB, 1>::run(args...); break;
      case 2: Fn<kB, 2>::run(args...); break;
      case 3: Fn<kB, 3>::run(args...); break;
      default: Fn<kB, 4>::run(args...); break;
    }
  };
  switch (bits) {
    case 1: by_m(std::integral_constant<unsigned, 1>{}); break;
    case 2: by_m(std::integral_constant<unsigned, 2>{}); break;
    case 3: by_m(std::integral_constant<unsigned, 3>{}); break;
    case 4: by_m(std::integral_constant<unsigned, 4>{}); break;
    case 5: by_m(std::integral_constant<unsigned, 5>{}); break;
    case 6: by_m(std::integral_constant<unsigned, 6>{}); break;
    case 7: by_m(std::integral_constant<unsigned, 7>{}); break;
    default: by_m(std::integral_constant<unsigned, 8>{}); break;
  }
}

template <unsigned B, size_t M>
struct DotRows {
  static void run(const Loop& L, const SignLoop* S, size_t rows, const float* qk, size_t positions,
                  float* const* out) {
    dot_rows<B, M>(L, S, rows, qk, positions, out);
  }
};
template <unsigned B, size_t M>
struct AccumulateRows {
  static void run(const Loop& L, size_t rows, const float* w, float* acck, size_t positions) {
    accumulate_rows<B, M>(L, rows, w, acck, positions);
  }
};

}  // namespace

struct PackedCodeKernel::Block {
  const uint8_t* codes;
  size_t stride;
};

PackedCodeKernel::PackedCodeKernel(size_t dim, unsigned bits, std::vector<float> table)
    : dim_(dim), bits_(bits) {
  if (dim == 0 || bits < 1 || bits > 8 || table.size() != (size_t{1} << bits)) {
    throw Error("PackedCodeKernel: dim " + std::to_string(dim) + ", bits " + std::to_string(bits) +
                ", table of " + std::to_string(table.size()) +
                "; expected dim >= 1, bits 1..8 and 2^bits entries");
  }
  const size_t N = lanes();
  const bool byte_aligned = 8 % bits == 0;
  unpack_ = !byte_aligned && N < 8;
  layout_bits_ = unpack_ ? 8 : bits;
  const size_t k = byte_aligned ? 8 / bits : 1;
  if (byte_aligned || unpack_) {
    const size_t code_bytes = unpack_ ? dim : packed_bytes(dim, bits);
    const size_t chunks = (code_bytes + N - 1) / N;
    vectors_ = (chunks * k + kTile - 1) / kTile * kTile;
    span_ = vectors_ / k * N;
  } else {
    vectors_ = ((dim + N - 1) / N + kTile - 1) / kTile * kTile;
    span_ = (vectors_ - 1) * (N * bits / 8) + 16;  // each chunk is read as 16 bytes
  }
  positions_ = vectors_ * N;
  table.resize(std::max(table.size(), N), 0.0f);
  table_ = std::move(table);
  // Coordinate c sits in byte c / k at sub-position c % k; byte j of chunk g feeds lane j of
  // vectors g * k .. g * k + k - 1. With one code per chunk lane (k = 1) this is the identity.
  position_of_.resize(dim);
  for (size_t c = 0; c < dim; ++c) {
    const size_t byte = c / k, sub = c % k;
    position_of_[c] = static_cast<uint32_t>(((byte / N) * k + sub) * N + byte % N);
  }
}

void PackedCodeKernel::to_kernel_order(const float* x, float* xk) const {
  std::fill(xk, xk + positions_, 0.0f);
  for (size_t c = 0; c < dim_; ++c) xk[position_of_[c]] = x[c];
}

void PackedCodeKernel::add_natural_order(const float* xk, float* x) const {
  for (size_t c = 0; c < dim_; ++c) x[c] += xk[position_of_[c]];
}

// Rows are read in place when the loop's reads (span_ bytes per row, which may run past a row's
// codes into the next record) stay inside the n records; otherwise, and always when rows must be
// unpacked, the block's codes go through a zero-padded scratch copy.
PackedCodeKernel::Block PackedCodeKernel::view_block(const uint8_t* records, size_t n, size_t t0, size_t m,
                                                     const RecordFormat& f,
                                                     std::vector<uint8_t>& scratch) const {
  const uint8_t* first = records + t0 * f.stride + f.code_offset;
  if (!unpack_ && (t0 + m - 1) * f.stride + f.code_offset + span_ <= n * f.stride) {
    return {first, f.stride};
  }
  // Only the first bytes of each scratch row are ever written, so the padding stays zero.
  if (scratch.size() < m * span_) scratch.assign(kBlockTokens * span_, 0);
  for (size_t r = 0; r < m; ++r) {
    uint8_t* dst = scratch.data() + r * span_;
    if (unpack_) {
      unpack_bits(first + r * f.stride, dim_, bits_, dst);
    } else {
      std::memcpy(dst, first + r * f.stride, packed_bytes(dim_, bits_));
    }
  }
  return {scratch.data(), span_};
}

void PackedCodeKernel::dot(const float* qk, size_t nq, const uint8_t* records, size_t n,
                           const RecordFormat& f, float factor, float* scores, const SignTerm* signs) const {
  std::vector<uint8_t> scratch, sign_scratch;
  for (size_t t0 = 0; t0 < n; t0 += kBlockTokens) {
    const size_t m = std::min(kBlockTokens, n - t0);
    const Block b = view_block(records, n, t0, m, f, scratch);
    const Loop L = block_loop(b.codes, b.stride, vectors_, table_.data(), records, n, t0, f, factor);
    SignLoop S{};
    if (signs) {
      // The 1-bit kernel's rows cover every byte the natural-order mask loads read.
      const PackedCodeKernel& k = *signs->kernel;
      const Block sb = k.view_block(records, n, t0, m, signs->format, sign_scratch);
      S = {sb.codes,
           sb.stride,
           (k.dim_ + lanes() - 1) / lanes(),
           nullptr,
           k.positions_,
           nullptr,
           records + t0 * signs->format.stride + signs->format.scale_offset,
           signs->format.stride,
           signs->factor};
    }
    for (size_t i0 = 0; i0 < nq; i0 += kMaxQueries) {
      const size_t mq = std::min(kMaxQueries, nq - i0);
      float* out[kMaxQueries];
      for (size_t i = 0; i < mq; ++i) out[i] = scores + (i0 + i) * n + t0;
      if (signs) {
        S.sketch = signs->twice_sketch + i0 * S.positions;
        S.totals = signs->totals + i0;
      }
      dispatch<DotRows>(layout_bits_, mq, L, static_cast<const SignLoop*>(signs ? &S : nullptr), m,
                        qk + i0 * positions_, positions_, static_cast<float* const*>(out));
    }
  }
}

void PackedCodeKernel::accumulate(const float* w, size_t nq, const uint8_t* records, size_t n,
                                  const RecordFormat& f, float factor, float* acck) const {
  std::vector<uint8_t> scratch;
  std::vector<float> scale(kBlockTokens), wb(kMaxQueries * kBlockTokens);
  for (size_t t0 = 0; t0 < n; t0 += kBlockTokens) {
    const size_t m = std::min(kBlockTokens, n - t0);
    const Block b = view_block(records, n, t0, m, f, scratch);
    const Loop L = block_loop(b.codes, b.stride, vectors_, table_.data(), records, n, t0, f, factor);
    for (size_t t = 0; t < m; ++t) scale[t] = row_scale(L, t);
    for (size_t i0 = 0; i0 < nq; i0 += kMaxQueries) {
      const size_t mq = std::min(kMaxQueries, nq - i0);
      for (size_t i = 0; i < mq; ++i)
        for (size_t t = 0; t < m; ++t) wb[i * m + t] = w[(i0 + i) * n + t0 + t] * scale[t];
      dispatch<AccumulateRows>(layout_bits_, mq, L, m, static_cast<const float*>(wb.data()),
                               acck + i0 * positions_, positions_);
    }
  }
}

}  // namespace veloxquant
