// k-means: the inverted-file (IVF) partition RaBitQ quantizes residuals against, and VecInfer's
// per-subspace codebooks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant {

// k centroids ([k, dim] row-major) of the n rows x[i * stride .. + dim): k-means++ seeding from
// `seed`, then Lloyd iterations until no row changes cluster (at most `iterations`). With fewer
// distinct rows than k, the surplus centroids repeat chosen rows. REQUIRES: n >= 1, k >= 1.
std::vector<float> kmeans(const float* x, size_t n, size_t stride, size_t dim, size_t k, uint64_t seed,
                          int iterations = 25);

// Index of the centroid nearest to x (squared L2; the lowest index on ties).
size_t nearest_centroid(const float* x, const float* centroids, size_t k, size_t dim);

}  // namespace veloxquant
