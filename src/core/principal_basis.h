// The leading principal directions of a set of vectors, for the methods that store keys and
// values as latents on a basis fitted at prefill (svdq, palu).
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant {

// The `rank` leading right singular vectors of the matrix whose rows are the vectors
// x[t * stride + j * dim .. + dim) for t < n, j < count (count vectors side by side per row of
// x: the heads of a group), computed as the eigenvectors of their uncentred dim x dim Gram
// matrix in double, largest singular value first, each with its first largest-magnitude element
// made positive so that the basis is canonical. Directions the vectors do not span (fewer
// vectors than rank, zeros: eigenvalues below 1e-10 of the largest) are completed by the next
// columns of the Q of a Householder QR of the directions found (the identity when none), so the
// result is always orthonormal and depends on nothing but x.
// Returns [rank][dim]: direction j at [j * dim, (j + 1) * dim).
std::vector<double> principal_directions(const float* x, size_t n, size_t stride, size_t count,
                                         size_t dim, size_t rank);

// The smallest power of two >= 2 sqrt(dim). A latent (a dot product with a unit vector) of a
// vector within the fp16 range is at most sqrt(dim) x 65504; divided by this it stays within half
// the fp16 range, so fp16 grids over latents cannot overflow, and powers of two scale exactly.
float latent_scale(size_t dim);

}  // namespace veloxquant
