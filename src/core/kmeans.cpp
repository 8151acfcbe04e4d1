#include "core/kmeans.h"

#include <algorithm>
#include <limits>

#include "core/rng.h"

namespace veloxquant {
namespace {

double squared_distance(const float* a, const float* b, size_t dim) {
  double s = 0;
  for (size_t c = 0; c < dim; ++c) {
    const double e = static_cast<double>(a[c]) - b[c];
    s += e * e;
  }
  return s;
}

}  // namespace

size_t nearest_centroid(const float* x, const float* centroids, size_t k, size_t dim) {
  size_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < k; ++j) {
    const double d = squared_distance(x, centroids + j * dim, dim);
    if (d < best_d) best = j, best_d = d;
  }
  return best;
}

CentroidSearch::CentroidSearch(const float* centroids, size_t k, size_t dim)
    : k_(k), dim_(dim), columns_(k * dim) {
  for (size_t j = 0; j < k; ++j)
    for (size_t c = 0; c < dim; ++c) columns_[c * k + j] = centroids[j * dim + c];
}

size_t CentroidSearch::nearest(const float* x, double* dist) const {
  std::fill_n(dist, k_, 0.0);
  for (size_t c = 0; c < dim_; ++c) {
    const double xc = x[c];
    const float* column = columns_.data() + c * k_;
    for (size_t j = 0; j < k_; ++j) {
      const double e = xc - column[j];
      dist[j] += e * e;
    }
  }
  size_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < k_; ++j)
    if (dist[j] < best_d) best = j, best_d = dist[j];
  return best;
}

std::vector<float> kmeans(const float* x, size_t n, size_t stride, size_t dim, size_t k, uint64_t seed,
                          int iterations) {
  const auto row = [&](size_t i) { return x + i * stride; };
  std::vector<float> centroids(k * dim);
  // k-means++: each next centroid is a row drawn with probability proportional to its squared
  // distance from the centroids chosen so far.
  Rng rng(seed);
  std::vector<double> nearest(n, std::numeric_limits<double>::infinity());
  size_t chosen = static_cast<size_t>(rng.next_u64() % n);
  for (size_t j = 0; j < k; ++j) {
    std::copy_n(row(chosen), dim, centroids.begin() + static_cast<std::ptrdiff_t>(j * dim));
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      nearest[i] = std::min(nearest[i], squared_distance(row(i), centroids.data() + j * dim, dim));
      total += nearest[i];
    }
    if (total <= 0) continue;  // every row already is a centroid: repeat the last one
    double target = rng.uniform() * total;
    for (chosen = 0; chosen + 1 < n && target >= nearest[chosen]; ++chosen) target -= nearest[chosen];
  }
  std::vector<size_t> assignment(n, k);
  std::vector<double> sums(k * dim);
  std::vector<size_t> counts(k);
  std::vector<double> dist(k);
  for (int it = 0; it < iterations; ++it) {
    bool changed = false;
    const CentroidSearch search(centroids.data(), k, dim);
    for (size_t i = 0; i < n; ++i) {
      const size_t a = search.nearest(row(i), dist.data());
      changed |= a != assignment[i];
      assignment[i] = a;
    }
    if (!changed) break;
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      ++counts[assignment[i]];
      for (size_t c = 0; c < dim; ++c) sums[assignment[i] * dim + c] += row(i)[c];
    }
    // An emptied cluster keeps its centroid.
    for (size_t j = 0; j < k; ++j)
      if (counts[j])
        for (size_t c = 0; c < dim; ++c)
          centroids[j * dim + c] = static_cast<float>(sums[j * dim + c] / static_cast<double>(counts[j]));
  }
  return centroids;
}

}  // namespace veloxquant
