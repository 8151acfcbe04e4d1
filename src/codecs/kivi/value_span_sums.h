// Attention-weighted sums straight from KIVI value blocks: [quad codes][fp16 scale[groups][4]]
// [fp16 min[groups][4]], 4 tokens per block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::kivi {

inline constexpr size_t kQuadsPerSpan = 16;  // 64 tokens share one int8 weight scale per group

// For `quads` <= kQuadsPerSpan consecutive blocks (`block_bytes` apart) and nq <= 4 weight rows
// (row j at w + j * ldw, 4 weights per block):
//   out[j * dim + c]      += sum_t w_jt scale_tg code_tc      (g = c / group)
//   offset[j * groups + g] += sum_t w_jt min_tg
// The folded weights w_jt scale_tg (>= 0) are written as unit * (256 hi + lo) with int8 hi, lo
// (15-bit precision; one unit per row and group over the span, so a sink token's large weight
// does not round its neighbours' small weights away), then summed against the codes by u8 x s8
// dot products.
void accumulate_value_span(const uint8_t* blocks, size_t block_bytes, size_t quads, size_t dim,
                           unsigned bits, size_t group, const float* w, size_t ldw, size_t nq,
                           float* out, float* offset);
// The same arithmetic one element at a time: the reference the vector kernel is tested against,
// and the path on CPUs without AVX-512 VNNI.
void accumulate_value_span_reference(const uint8_t* blocks, size_t block_bytes, size_t quads,
                                     size_t dim, unsigned bits, size_t group, const float* w,
                                     size_t ldw, size_t nq, float* out, float* offset);

}  // namespace veloxquant::kivi
