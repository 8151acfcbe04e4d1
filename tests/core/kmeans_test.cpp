// k-means and the nearest-centroid searches: the transposed search answers as the plain one does,
// bit for bit (ties and NaN included), and k-means finds well-separated clusters.
#include "core/kmeans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "test_data.h"

namespace veloxquant {
namespace {

using test::gaussian;

TEST(CentroidSearch, AnswersAsNearestCentroidDoes) {
  for (size_t k : {1, 3, 16, 256}) {
    for (size_t dim : {1, 7, 8, 128}) {
      std::vector<float> centroids = gaussian(k * dim, 100 * k + dim);
      if (k > 2) std::copy_n(centroids.begin(), dim, centroids.begin() + 2 * dim);  // a tie: 0 and 2
      const size_t n = 200;
      std::vector<float> rows = gaussian(n * dim, 7 * k + dim, 0.5f);
      std::copy_n(centroids.begin(), dim, rows.begin());  // on centroid 0, and 2 where they tie
      rows[dim] = std::numeric_limits<float>::quiet_NaN();
      const CentroidSearch search(centroids.data(), k, dim);
      std::vector<double> dist(k);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(search.nearest(rows.data() + i * dim, dist.data()),
                  nearest_centroid(rows.data() + i * dim, centroids.data(), k, dim))
            << "k " << k << ", dim " << dim << ", row " << i;
      }
    }
  }
}

TEST(Kmeans, FindsSeparatedClusters) {
  const size_t dim = 8, per = 300, k = 4;
  std::vector<float> rows;
  for (size_t j = 0; j < k; ++j) {
    const std::vector<float> noise = gaussian(per * dim, 40 + j, 0.1f);
    for (size_t i = 0; i < per; ++i)
      for (size_t c = 0; c < dim; ++c) rows.push_back(noise[i * dim + c] + (c == j ? 10.0f : 0.0f));
  }
  const std::vector<float> centroids = kmeans(rows.data(), k * per, dim, dim, k, 5);
  for (size_t j = 0; j < k; ++j) {  // every cluster's centre has a centroid within its noise
    std::vector<float> centre(dim, 0.0f);
    centre[j] = 10.0f;
    const size_t c = nearest_centroid(centre.data(), centroids.data(), k, dim);
    for (size_t i = 0; i < dim; ++i) EXPECT_NEAR(centroids[c * dim + i], centre[i], 0.05f) << j;
  }
}

}  // namespace
}  // namespace veloxquant
