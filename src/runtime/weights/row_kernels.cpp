#include "runtime/weights/row_kernels.h"

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cstring>

#include "runtime/gguf/block_decoders.h"
#include "runtime/weights/lane_sums.h"
#include "veloxquant/tensor.h"

namespace veloxquant::runtime::kernels {
namespace {

// Each plain type says how to load a vector of its elements as f32 from element c of a row, and
// one element (for the last elements of a row shorter than a vector). Sums live in arrays of
// vectors, which needs a fixed-width target (x86, NEON); a scalable one (SVE, RVV) would need
// them unrolled by hand.

struct F32Format {
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
// loaded vectors fit AVX-512's 32 registers.
constexpr size_t kMaxTokens = 4;

// Folds elements [end, cols) of a row into each token's sum. The vector ending at cols is used
// with the lanes the main loop covered zeroed; a row shorter than a vector is summed in scalar
// into lane 0.
template <class Fmt, size_t T>
HWY_INLINE void add_tail(DF df, const uint8_t* row, size_t end, size_t cols, const float* x,
                         size_t ldx, VF* acc) {
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

// y[t * ldy + i] = row_i . x_t for R consecutive rows (1 or 4) and T tokens. Every (row, token)
// sum takes the same steps whatever R and T are, so results do not depend on how rows and tokens
// are grouped.
template <class Fmt, size_t R, size_t T>
HWY_INLINE void dot_tile(DF df, const uint8_t* w, size_t row_bytes, size_t cols, const float* x,
                         size_t ldx, float* y, size_t ldy) {
  const size_t step = hn::Lanes(df), end = cols - cols % step;
  VF acc[R][T];
  for (size_t i = 0; i < R; ++i)
    for (size_t t = 0; t < T; ++t) acc[i][t] = hn::Zero(df);
  for (size_t c = 0; c < end; c += step) {
#pragma GCC unroll 4
    for (size_t i = 0; i < R; ++i) {
      // The same bytes of the next R rows: the hardware prefetcher starts each new row's stream
      // late, and a decode step's weights come from DRAM (1 thread: 12 to 19 GB/s, measured).
      hwy::Prefetch(w + (R + i) * row_bytes + c * (row_bytes / cols));
      const VF wv = Fmt::load(df, w + i * row_bytes, c);
#pragma GCC unroll 4
      for (size_t t = 0; t < T; ++t) acc[i][t] = hn::MulAdd(wv, hn::LoadU(df, x + t * ldx + c), acc[i][t]);
    }
  }
  for (size_t i = 0; i < R; ++i) add_tail<Fmt, T>(df, w + i * row_bytes, end, cols, x, ldx, acc[i]);
  store_row_sums(df, acc, T, y, ldy);
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
  const size_t step = hn::Lanes(df), end = cols - cols % step;
  for (size_t r = 0; r < nrows; ++r, out += cols) {
    const uint8_t* row = w + r * row_bytes;
    for (size_t c = 0; c < end; c += step) hn::StoreU(Fmt::load(df, row, c), df, out + c);
    for (size_t c = end; c < cols; ++c) out[c] = Fmt::scalar(row, c);
  }
}

// Calls fn with the format of a plain `type` (a value of that type, for deduction).
template <class Fn>
void with_plain_format(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::F32: return fn(F32Format{});
    case GgmlType::F16: return fn(F16Format{});
    case GgmlType::BF16: return fn(BF16Format{});
    default:
      throw Error(std::string("f32 row kernels: expected f32, f16 or bf16 weights, found ") +
                  ggml_type_name(type));
  }
}

}  // namespace

void dot_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
              const float* x, size_t ldx, size_t ntokens, float* y, size_t ldy) {
  with_plain_format(type, [&](auto fmt) {
    dot_rows_of<decltype(fmt)>(w, row_bytes, nrows, cols, x, ldx, ntokens, y, ldy);
  });
}

void decode_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                 float* out) {
  if (const gguf::BlockDecoder decode = gguf::block_decoder(type)) {
    const size_t elements = ggml_block_elements(type), bytes = ggml_block_bytes(type);
    for (size_t r = 0; r < nrows; ++r, out += cols)
      for (size_t b = 0; b < cols / elements; ++b) decode(w + r * row_bytes + b * bytes, out + b * elements);
    return;
  }
  with_plain_format(type, [&](auto fmt) { decode_rows_of<decltype(fmt)>(w, row_bytes, nrows, cols, out); });
}

}  // namespace veloxquant::runtime::kernels
