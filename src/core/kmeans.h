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

// nearest_centroid for many rows against one set of centroids, held transposed ([dim][k]) so that
// a row's k distances grow together a coordinate at a time: the same double sums in the same
// order as nearest_centroid (the same answer, bit for bit), vectorized over the centroids.
class CentroidSearch {
 public:
  CentroidSearch() = default;  // no centroids: nearest() must not be called
  CentroidSearch(const float* centroids, size_t k, size_t dim);
  // dist: scratch of k doubles (the caller's, so one search serves many threads).
  size_t nearest(const float* x, double* dist) const;
  size_t size() const { return k_; }

 private:
  size_t k_ = 0, dim_ = 0;
  std::vector<float> columns_;  // [dim][k]
};

}  // namespace veloxquant
