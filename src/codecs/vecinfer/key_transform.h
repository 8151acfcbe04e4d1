// VecInfer's dual transform of keys (Yao et al., arXiv 2510.06175): each key channel c is divided
// by a smoothing factor lambda_c = sqrt(max_t |K_tc|) taken over calibration keys, then the key is
// rotated by an orthogonal R (Hadamard). Outlier channels shrink and the rotation spreads what is
// left over all coordinates, so the product-VQ codebooks see near-uniform sub-spaces.
//
// Queries take the inverse: q' = R (lambda * q), so q' . R (k / lambda) = q . k exactly; attention
// scores are computed in the transformed space and keys are never transformed back there.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/rotation.h"

namespace veloxquant::vecinfer {

// The rotation keys are coded in: a randomized Hadamard transform (a dense Haar rotation when
// dim is not a power of two) from one fixed seed, so a calibration artifact's codebooks, fitted
// in this space, hold for every cache built from it.
Rotation key_rotation(size_t dim);

// lambda_c = sqrt(max over the `tokens` rows of |keys[t * stride + c]|), c < dim. A channel that is
// zero throughout gets 1 (dividing by it would be undefined; any factor reproduces zero).
std::vector<float> smoothing_factors(const float* keys, size_t tokens, size_t stride, size_t dim);

// In place on `rows` consecutive vectors of smooth.size() floats. REQUIRES: r.dim() == smooth.size().
void transform_keys(const Rotation& r, std::span<const float> smooth, float* x, size_t rows);      // R (x / lambda)
void transform_queries(const Rotation& r, std::span<const float> smooth, float* q, size_t rows);   // R (lambda q)
void restore_keys(const Rotation& r, std::span<const float> smooth, float* y, size_t rows);        // lambda R^T y

}  // namespace veloxquant::vecinfer
