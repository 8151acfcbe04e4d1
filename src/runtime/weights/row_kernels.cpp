#include "runtime/weights/row_kernels.h"

#include <hwy/highway.h>

#include <cstring>

#include "runtime/gguf/block_decoders.h"
#include "veloxquant/tensor.h"

namespace veloxquant::runtime::kernels {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

// At most 16 lanes, so that a whole number of vectors always fills a 32-element quant block.
using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

constexpr size_t kQBlock = 32;  // elements per Q8_0 / Q4_0 block

// The block's fp16 scale (any alignment), through the hardware conversion where there is one.
HWY_INLINE float load_scale(const uint8_t* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> dh1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(dh1, reinterpret_cast<const hwy::float16_t*>(p))));
}

// ---- formats --------------------------------------------------------------------------------
// Each format says how many elements one step covers (a vector for the plain types, a block for
// the quantized ones), how to fold a step of a row into the running f32 sums of up to 4 tokens
// (accumulate), and how to decode it (decode_step). The plain types may end in a partial vector
// (kHasTail), the quantized ones never do. Sums live in arrays of vectors, which needs a
// fixed-width target (x86, NEON); a scalable one (SVE, RVV) would need them unrolled by hand.

struct F32Format {
  static constexpr bool kHasTail = true;
  static size_t step(DF df) { return hn::Lanes(df); }
  static VF load(DF df, const uint8_t* row, size_t c) {
    return hn::LoadU(df, reinterpret_cast<const float*>(row) + c);
  }
  static float scalar(const uint8_t* row, size_t c) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  }
};

struct F16Format {
  static constexpr bool kHasTail = true;
  static size_t step(DF df) { return hn::Lanes(df); }
  static VF load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + c));
  }
  static float scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return f16_to_f32(h);
  }
};

struct BF16Format {
  static constexpr bool kHasTail = true;
  static size_t step(DF df) { return hn::Lanes(df); }
  // bf16 is the top half of an f32: widen the bits and shift them into place (exact).
  static VF load(DF df, const uint8_t* row, size_t c) {
    const hn::Rebind<uint16_t, DF> du16;
    const hn::RebindToUnsigned<DF> du32;
    const auto bits = hn::PromoteTo(du32, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(row) + c));
    return hn::BitCast(df, hn::ShiftLeft<16>(bits));
  }
  static float scalar(const uint8_t* row, size_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return bf16_to_f32(h);
  }
};

// Most tokens one pass of the kernels carries: 4 rows x 4 tokens of accumulators plus the
// block's partial sums fit AVX-512's 32 registers.
constexpr size_t kMaxTokens = 4;

// acc[t] += (step of row at c) * x_t, for T tokens x_t = x + t * ldx.
template <class Plain>
struct PlainSteps : Plain {
  template <size_t T>
  static void accumulate(DF df, const uint8_t* row, size_t c, const float* x, size_t ldx, VF* acc) {
    const VF wv = Plain::load(df, row, c);
#pragma GCC unroll 4
    for (size_t t = 0; t < T; ++t) acc[t] = hn::MulAdd(wv, hn::LoadU(df, x + t * ldx + c), acc[t]);
  }
  static void decode_step(DF df, const uint8_t* row, size_t c, float* out) {
    hn::StoreU(Plain::load(df, row, c), df, out);
  }
};

// Q8_0: fp16 scale d, then 32 int8 codes; element j = d * code[j].
struct Q8Block {
  static constexpr size_t kBytes = 2 + kQBlock;
  // fn(j, codes j .. j + lanes as floats), over the block.
  template <class Fn>
  static void for_each_chunk(DF df, const uint8_t* blk, Fn&& fn) {
    const hn::Rebind<int8_t, DF> di8;
    const hn::RebindToSigned<DF> di32;
    for (size_t j = 0; j < kQBlock; j += hn::Lanes(df)) {
      const auto q = hn::LoadU(di8, reinterpret_cast<const int8_t*>(blk + 2) + j);
      fn(j, hn::ConvertTo(df, hn::PromoteTo(di32, q)));
    }
  }
};

// Q4_0: fp16 scale d, then 16 bytes whose low nibbles are elements 0..15 and high nibbles
// elements 16..31; element = d * (nibble - 8). One load of bytes yields both halves.
struct Q4Block {
  static constexpr size_t kBytes = 2 + kQBlock / 2;
  template <class Fn>
  static void for_each_chunk(DF df, const uint8_t* blk, Fn&& fn) {
    const hn::Rebind<uint8_t, DF> du8;
    const hn::Rebind<int8_t, DF> di8;
    const hn::RebindToSigned<DF> di32;
    const auto mask = hn::Set(du8, 0x0f), eight = hn::Set(du8, 8);
    // (nibble - 8) wraps in u8 and reads back as the right int8.
    auto to_float = [&](auto nibbles) {
      return hn::ConvertTo(df, hn::PromoteTo(di32, hn::BitCast(di8, hn::Sub(nibbles, eight))));
    };
    for (size_t j = 0; j < kQBlock / 2; j += hn::Lanes(df)) {
      const auto bytes = hn::LoadU(du8, blk + 2 + j);
      fn(j, to_float(hn::And(bytes, mask)));
      fn(kQBlock / 2 + j, to_float(hn::ShiftRight<4>(bytes)));
    }
  }
};

template <class Block>
struct QuantSteps {
  static constexpr bool kHasTail = false;
  static size_t step(DF) { return kQBlock; }
  // Each token's integer-weighted block sum is scaled once; d * code is exact in f32, so this
  // differs from dotting the dequantized values only by f32 rounding.
  template <size_t T>
  static void accumulate(DF df, const uint8_t* row, size_t c, const float* x, size_t ldx, VF* acc) {
    const uint8_t* blk = row + c / kQBlock * Block::kBytes;
    VF s[T];
#pragma GCC unroll 4
    for (size_t t = 0; t < T; ++t) s[t] = hn::Zero(df);
    Block::for_each_chunk(df, blk, [&](size_t j, VF q) {
#pragma GCC unroll 4
      for (size_t t = 0; t < T; ++t) s[t] = hn::MulAdd(q, hn::LoadU(df, x + t * ldx + c + j), s[t]);
    });
    const VF d = hn::Set(df, load_scale(blk));
#pragma GCC unroll 4
    for (size_t t = 0; t < T; ++t) acc[t] = hn::MulAdd(s[t], d, acc[t]);
  }
  static void decode_step(DF df, const uint8_t* row, size_t c, float* out) {
    const uint8_t* blk = row + c / kQBlock * Block::kBytes;
    const VF d = hn::Set(df, load_scale(blk));
    Block::for_each_chunk(df, blk, [&](size_t j, VF q) { hn::StoreU(hn::Mul(d, q), df, out + j); });
  }
};

// Every other block type: each block is decoded by its reference decoder into an f32 buffer on the
// stack, then dotted from there with every token of the tile, so the values are dequantize()'s.
template <size_t kElements, size_t kBytes, void (*kDecode)(const uint8_t*, float*)>
struct DecodedSteps {
  static constexpr bool kHasTail = false;
  static size_t step(DF) { return kElements; }
  template <size_t T>
  static void accumulate(DF df, const uint8_t* row, size_t c, const float* x, size_t ldx, VF* acc) {
    HWY_ALIGN float w[kElements];
    kDecode(row + c / kElements * kBytes, w);
    for (size_t j = 0; j < kElements; j += hn::Lanes(df)) {
      const VF wv = hn::Load(df, w + j);
#pragma GCC unroll 4
      for (size_t t = 0; t < T; ++t) acc[t] = hn::MulAdd(wv, hn::LoadU(df, x + t * ldx + c + j), acc[t]);
    }
  }
  static void decode_step(DF, const uint8_t* row, size_t c, float* out) {
    kDecode(row + c / kElements * kBytes, out);
  }
};

// ---- kernels --------------------------------------------------------------------------------

// Whether sums4 can keep four partial sums side by side in each 128-bit block.
constexpr bool kBlockSums = HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE;

// Adds the 128-bit blocks of v and stores the resulting 4 lanes.
template <class D, class V>
HWY_INLINE void store_block_sum(D d, V v, float* out) {
  if constexpr (hn::MaxLanes(d) > 4) {
    const hn::Half<D> dh;
    store_block_sum(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}

// out[i] = the sum of the lanes of a_i. Two rounds of interleave-and-add gather the four partial
// sums side by side in every block: a third of the shuffles of four separate reductions, which
// is most of the work for stories260K's 64-wide rows.
HWY_INLINE void sums4(DF df, VF a0, VF a1, VF a2, VF a3, float* out) {
  if constexpr (kBlockSums) {
    const hn::Repartition<double, DF> dd;
    const auto s01 = hn::BitCast(dd, hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1)));
    const auto s23 = hn::BitCast(dd, hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3)));
    store_block_sum(df, hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, s01, s23)),
                                hn::BitCast(df, hn::InterleaveUpper(dd, s01, s23))), out);
  } else {
    out[0] = hn::GetLane(hn::SumOfLanes(df, a0));
    out[1] = hn::GetLane(hn::SumOfLanes(df, a1));
    out[2] = hn::GetLane(hn::SumOfLanes(df, a2));
    out[3] = hn::GetLane(hn::SumOfLanes(df, a3));
  }
}

// Folds elements [end, cols) of a row into each token's sum; only plain types have them. The
// vector ending at cols is used with the lanes the main loop covered zeroed; a row shorter than a
// vector is summed in scalar into lane 0.
template <class Fmt, size_t T>
HWY_INLINE void add_tail(DF df, const uint8_t* row, size_t end, size_t cols, const float* x,
                         size_t ldx, VF* acc) {
  if constexpr (Fmt::kHasTail) {
    const size_t n = hn::Lanes(df);
    if (end == cols) return;
    if (cols >= n) {
      const size_t c = cols - n;
      const VF wv = hn::IfThenZeroElse(hn::FirstN(df, end - c), Fmt::load(df, row, c));
      for (size_t t = 0; t < T; ++t) acc[t] = hn::MulAdd(wv, hn::LoadU(df, x + t * ldx + c), acc[t]);
      return;
    }
    for (size_t t = 0; t < T; ++t) {
      float s = 0;
      for (size_t c = end; c < cols; ++c) s += Fmt::scalar(row, c) * x[t * ldx + c];
      acc[t] = hn::Add(acc[t], hn::IfThenElseZero(hn::FirstN(df, 1), hn::Set(df, s)));
    }
  }
}

// y[t * ldy + i] = row_i . x_t for R consecutive rows (1 or 4) and T tokens. Every (row, token)
// sum takes the same steps whatever R and T are, so results do not depend on how rows and tokens
// are grouped.
template <class Fmt, size_t R, size_t T>
HWY_INLINE void dot_tile(DF df, const uint8_t* w, size_t row_bytes, size_t cols, const float* x,
                         size_t ldx, float* y, size_t ldy) {
  const size_t step = Fmt::step(df), end = cols - cols % step;
  VF acc[R][T];
  for (size_t i = 0; i < R; ++i)
    for (size_t t = 0; t < T; ++t) acc[i][t] = hn::Zero(df);
  for (size_t c = 0; c < end; c += step) {
#pragma GCC unroll 4
    for (size_t i = 0; i < R; ++i) Fmt::template accumulate<T>(df, w + i * row_bytes, c, x, ldx, acc[i]);
  }
  for (size_t i = 0; i < R; ++i) add_tail<Fmt, T>(df, w + i * row_bytes, end, cols, x, ldx, acc[i]);
  for (size_t t = 0; t < T; ++t) {
    if constexpr (R == 4) {
      sums4(df, acc[0][t], acc[1][t], acc[2][t], acc[3][t], y + t * ldy);
    } else {
      // The same reduction tree as a row of four (adding zeros is exact), so the same bits.
      float sum[4];
      sums4(df, acc[0][t], hn::Zero(df), hn::Zero(df), hn::Zero(df), sum);
      y[t * ldy] = sum[0];
    }
  }
}

// Rows in groups of 4 (sharing each load of x, hiding each other's FMA latency), tokens in groups
// of up to kMaxTokens (sharing each decoded weight); a group of rows stays in L1 while every
// token passes over it.
template <class Fmt, size_t R>
HWY_INLINE void dot_rows_tokens(DF df, const uint8_t* w, size_t row_bytes, size_t cols,
                                const float* x, size_t ldx, size_t ntokens, float* y, size_t ldy) {
  size_t t = 0;
  for (; t + kMaxTokens <= ntokens; t += kMaxTokens)
    dot_tile<Fmt, R, kMaxTokens>(df, w, row_bytes, cols, x + t * ldx, ldx, y + t * ldy, ldy);
  switch (ntokens - t) {
    case 1: dot_tile<Fmt, R, 1>(df, w, row_bytes, cols, x + t * ldx, ldx, y + t * ldy, ldy); break;
    case 2: dot_tile<Fmt, R, 2>(df, w, row_bytes, cols, x + t * ldx, ldx, y + t * ldy, ldy); break;
    case 3: dot_tile<Fmt, R, 3>(df, w, row_bytes, cols, x + t * ldx, ldx, y + t * ldy, ldy); break;
    default: break;
  }
}

template <class Fmt>
void dot_rows_of(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols, const float* x,
                 size_t ldx, size_t ntokens, float* y, size_t ldy) {
  const DF df;
  size_t r = 0;
  for (; r + 4 <= nrows; r += 4)
    dot_rows_tokens<Fmt, 4>(df, w + r * row_bytes, row_bytes, cols, x, ldx, ntokens, y + r, ldy);
  for (; r < nrows; ++r)
    dot_rows_tokens<Fmt, 1>(df, w + r * row_bytes, row_bytes, cols, x, ldx, ntokens, y + r, ldy);
}

template <class Fmt>
void decode_rows_of(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols, float* out) {
  const DF df;
  const size_t step = Fmt::step(df), end = cols - cols % step;
  for (size_t r = 0; r < nrows; ++r, out += cols) {
    const uint8_t* row = w + r * row_bytes;
    for (size_t c = 0; c < end; c += step) Fmt::decode_step(df, row, c, out + c);
    if constexpr (Fmt::kHasTail) {
      for (size_t c = end; c < cols; ++c) out[c] = Fmt::scalar(row, c);
    }
  }
}

// Calls fn with the step policy of `type` (a value of that type, for deduction).
template <class Fn>
void with_format(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::F32: return fn(PlainSteps<F32Format>{});
    case GgmlType::F16: return fn(PlainSteps<F16Format>{});
    case GgmlType::BF16: return fn(PlainSteps<BF16Format>{});
    case GgmlType::Q8_0: return fn(QuantSteps<Q8Block>{});
    case GgmlType::Q4_0: return fn(QuantSteps<Q4Block>{});
    case GgmlType::Q4_1: return fn(DecodedSteps<32, 20, gguf::decode_q4_1>{});
    case GgmlType::Q5_0: return fn(DecodedSteps<32, 22, gguf::decode_q5_0>{});
    case GgmlType::Q5_1: return fn(DecodedSteps<32, 24, gguf::decode_q5_1>{});
    case GgmlType::IQ4_NL: return fn(DecodedSteps<32, 18, gguf::decode_iq4_nl>{});
    case GgmlType::Q2_K: return fn(DecodedSteps<256, 84, gguf::decode_q2_k>{});
    case GgmlType::Q3_K: return fn(DecodedSteps<256, 110, gguf::decode_q3_k>{});
    case GgmlType::Q4_K: return fn(DecodedSteps<256, 144, gguf::decode_q4_k>{});
    case GgmlType::Q5_K: return fn(DecodedSteps<256, 176, gguf::decode_q5_k>{});
    case GgmlType::Q6_K: return fn(DecodedSteps<256, 210, gguf::decode_q6_k>{});
    case GgmlType::IQ4_XS: return fn(DecodedSteps<256, 136, gguf::decode_iq4_xs>{});
    default:
      throw Error(std::string("weight kernels: unsupported ggml type ") + ggml_type_name(type));
  }
}

}  // namespace

void dot_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
              const float* x, size_t ldx, size_t ntokens, float* y, size_t ldy) {
  with_format(type, [&](auto fmt) {
    dot_rows_of<decltype(fmt)>(w, row_bytes, nrows, cols, x, ldx, ntokens, y, ldy);
  });
}

void decode_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                 float* out) {
  with_format(type, [&](auto fmt) { decode_rows_of<decltype(fmt)>(w, row_bytes, nrows, cols, out); });
}

}  // namespace veloxquant::runtime::kernels
