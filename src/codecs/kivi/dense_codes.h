// KIVI's layout for the head dims the lane tiles do not fit (lane_tiles.h needs whole 64-byte word
// rows: keys a head_dim that is a multiple of 32 / kbits, values a multiple of 128 / vbits split
// into value groups that are multiples of 16). A "dense" block holds its codes as one
// little-endian bit stream in core/bitpack.h's layout, token-major: code i = token * dim + channel
// at bits [i bits, (i + 1) bits). It has exactly the bytes of a tiled block: nothing is padded.
//
// Attention still runs on the codes, in f32 rather than the tiles' integer dot products:
//  - keys:   q . k_t = sum_c (q_c scale_c) code_tc + sum_c q_c min_c; the folded query is built
//            once per block and query, the block's codes become floats once for every query;
//  - values: sum_t w_t v_tc = sum_t (w_t scale_tg) code_tc + sum_t w_t min_tg; the min terms are
//            summed per group and added once per call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::kivi {

// Key blocks of `group` tokens, `block_bytes` apart: [fp16 scale[dim]][fp16 min[dim]][codes].
// scores[j * ld + t] = q_j . k_t for the blocks * group tokens and nq queries q ([nq][dim]).
void score_dense_keys(const uint8_t* blocks, size_t count, size_t block_bytes, size_t dim,
                      unsigned bits, size_t group, const float* q, size_t nq, float* scores,
                      size_t ld);
// The same sums element by element in double precision, straight from the bit stream: the
// reference the kernel above is tested against.
void score_dense_keys_reference(const uint8_t* blocks, size_t count, size_t block_bytes,
                                size_t dim, unsigned bits, size_t group, const float* q, size_t nq,
                                float* scores, size_t ld);

// Value blocks of 4 tokens, `block_bytes` apart: [codes][fp16 scale[groups][4]][fp16 min[groups][4]]
// with group g the channels [g * group, min(dim, (g + 1) * group)) (the last one may be shorter).
// out[j * dim + c] += sum_t w[j * ldw + t] * v_tc over the count * 4 tokens and nq weight rows.
void accumulate_dense_values(const uint8_t* blocks, size_t count, size_t block_bytes, size_t dim,
                             unsigned bits, size_t group, const float* w, size_t ldw, size_t nq,
                             float* out);
void accumulate_dense_values_reference(const uint8_t* blocks, size_t count, size_t block_bytes,
                                       size_t dim, unsigned bits, size_t group, const float* w,
                                       size_t ldw, size_t nq, float* out);

}  // namespace veloxquant::kivi
