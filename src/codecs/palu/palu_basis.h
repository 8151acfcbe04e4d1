// Palu's low-rank projection (Chang et al., ICLR 2025, arXiv 2407.21118), fitted to the vectors a
// group of KV heads holds at prefill instead of to the projection weights.
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant::palu {

// Which heads share one basis: consecutive groups of `group` heads, the last one smaller when
// `group` does not divide the number of heads.
inline size_t group_first(size_t head, size_t group) { return head / group * group; }

// The orthonormal basis of the heads [first, first + count) of x ([n, heads, dim]), [dim][rank]
// row-major: column j is principal direction j (core/principal_basis.h) of the group's vectors
// stacked (all tokens of all its heads, one matrix), completed deterministically where the data
// does not span rank directions.
//
// With `hadamard`, the columns [0, hi) and [hi, rank) are then each rotated by an orthonormal
// Walsh-Hadamard transform (hadamard_blocks), as Palu folds the transform into its projection
// matrices: the latents of one part spread their outliers over the part, and the part still spans
// the same leading singular directions.
std::vector<float> fit_basis(const float* x, size_t n, size_t heads, size_t first, size_t count,
                             size_t dim, size_t rank, size_t hi, bool hadamard);

// In place on m values: the orthonormal Walsh-Hadamard transform of each power-of-two block of m's
// binary decomposition, largest first (m = 40: [0, 32) and [32, 40)); a block of 1 is left as is.
// Orthonormal and its own inverse, like core/rotation.h's fwht, for any m.
void hadamard_blocks(float* x, size_t m);

}  // namespace veloxquant::palu
