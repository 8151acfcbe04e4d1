// Attention scores straight from one KIVI key block: [fp16 scale[dim]][fp16 min[dim]][tiles].
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::kivi {

// out[j * ld + t] = q_j . k_t for the `group` tokens of the block and nq <= 4 queries q ([nq][dim]).
// Within a block q . k_t = sum_c (q_c scale_c) code_tc + sum_c q_c min_c; the folded query
// q_c scale_c is written as step * (256 hi_c + lo_c) with int8 hi, lo (15-bit precision), so the
// codes are summed by u8 x s8 dot products, 16 tokens per instruction, read once for all queries.
void score_key_block(const uint8_t* block, size_t dim, unsigned bits, size_t group, const float* q,
                     size_t nq, float* out, size_t ld);
// The same arithmetic one element at a time: the reference the vector kernel is tested against,
// and the path on CPUs without AVX-512 VNNI.
void score_key_block_reference(const uint8_t* block, size_t dim, unsigned bits, size_t group,
                               const float* q, size_t nq, float* out, size_t ld);

}  // namespace veloxquant::kivi
