#include "core/lloyd_max.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

void expect_sorted_and_symmetric(const ScalarCodebook& cb, double tol) {
  const size_t L = cb.centroids.size();
  ASSERT_EQ(cb.boundaries.size(), L - 1);
  for (size_t k = 1; k < L; ++k) {
    EXPECT_LT(cb.centroids[k - 1], cb.boundaries[k - 1]);
    EXPECT_LT(cb.boundaries[k - 1], cb.centroids[k]);
    EXPECT_NEAR(cb.boundaries[k - 1], (cb.centroids[k - 1] + cb.centroids[k]) / 2, 1e-6);
  }
  for (size_t k = 0; k < L; ++k) EXPECT_NEAR(cb.centroids[k], -cb.centroids[L - 1 - k], tol);
}

TEST(LloydMax, GaussianKnownOptimalLevels) {
  const ScalarCodebook b1 = lloyd_max_gaussian(1);
  ASSERT_EQ(b1.centroids.size(), 2u);
  EXPECT_NEAR(b1.centroids[1], std::sqrt(2 / M_PI), 1e-4);  // 0.7979
  EXPECT_NEAR(b1.centroids[0], -std::sqrt(2 / M_PI), 1e-4);

  const ScalarCodebook b2 = lloyd_max_gaussian(2);
  ASSERT_EQ(b2.centroids.size(), 4u);
  EXPECT_NEAR(b2.centroids[2], 0.4528, 1e-3);
  EXPECT_NEAR(b2.centroids[3], 1.510, 1e-3);
  EXPECT_NEAR(b2.boundaries[2], 0.9816, 1e-3);
  for (unsigned bits = 1; bits <= 8; ++bits) expect_sorted_and_symmetric(lloyd_max_gaussian(bits), 1e-4);
}

TEST(LloydMax, GaussianDistortionMatchesTables) {
  const double expected[] = {0.3634, 0.1175, 0.03455, 0.009497};
  for (unsigned bits = 1; bits <= 4; ++bits) {
    const ScalarCodebook cb = lloyd_max_gaussian(bits);
    EXPECT_NEAR(cb.distortion, expected[bits - 1], 0.01 * expected[bits - 1]) << "bits " << bits;
  }
  // Scaling the density scales the levels and the distortion.
  const ScalarCodebook s = lloyd_max_gaussian(2, 3.0);
  EXPECT_NEAR(s.centroids[3], 3 * 1.510, 3e-3);
  EXPECT_NEAR(s.distortion, 9 * 0.1175, 9 * 0.1175 * 0.01);
}

TEST(LloydMax, DistortionAgreesWithMonteCarlo) {
  const ScalarCodebook cb = lloyd_max_gaussian(3);
  Rng rng(7);
  double sum = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const float x = static_cast<float>(rng.normal());
    const double e = x - cb.value(cb.quantize(x));
    sum += e * e;
  }
  EXPECT_NEAR(sum / n, cb.distortion, 0.02 * cb.distortion);
}

TEST(LloydMax, QuantizePicksNearestCentroid) {
  const ScalarCodebook cb = lloyd_max_gaussian(4);
  for (float x = -5; x <= 5; x += 0.01f) {
    const uint8_t k = cb.quantize(x);
    for (size_t j = 0; j < cb.centroids.size(); ++j)
      EXPECT_LE(std::abs(x - cb.centroids[k]), std::abs(x - cb.centroids[j]) + 1e-6) << x;
  }
  EXPECT_EQ(cb.quantize(-100.0f), 0);
  EXPECT_EQ(cb.quantize(100.0f), 15);
}

TEST(LloydMax, QuantizeCountsBoundariesAtOrBelowEveryWidth) {
  Rng rng(3);
  for (unsigned bits = 0; bits <= 8; ++bits) {
    const ScalarCodebook cb = lloyd_max_gaussian(bits);
    for (int i = 0; i < 5000; ++i) {
      // Mostly random points, some exactly on a boundary.
      const float x = (i % 7 == 0 && !cb.boundaries.empty())
                          ? cb.boundaries[static_cast<size_t>(i) % cb.boundaries.size()]
                          : static_cast<float>(3 * rng.normal());
      const size_t expected = static_cast<size_t>(
          std::upper_bound(cb.boundaries.begin(), cb.boundaries.end(), x) - cb.boundaries.begin());
      ASSERT_EQ(cb.quantize(x), expected) << "bits " << bits << " x " << x;
    }
  }
}

TEST(LloydMax, SphereCoordinateApproachesGaussianInHighDimension) {
  for (unsigned bits = 1; bits <= 4; ++bits) {
    const ScalarCodebook g = lloyd_max_gaussian(bits);
    const ScalarCodebook s = lloyd_max_sphere_coordinate(bits, 128);
    ASSERT_EQ(s.centroids.size(), g.centroids.size());
    const double scale = std::sqrt(128.0);
    for (size_t k = 0; k < g.centroids.size(); ++k)
      EXPECT_NEAR(s.centroids[k] * scale, g.centroids[k], 0.02 * std::abs(g.centroids[k]) + 1e-3)
          << "bits " << bits << " level " << k;
    // d * per-coordinate distortion is the paper's unit-vector MSE: 0.36, 0.117, 0.03, 0.009.
    EXPECT_NEAR(s.distortion * 128, g.distortion, 0.03 * g.distortion) << "bits " << bits;
    expect_sorted_and_symmetric(s, 1e-6);
  }
}

TEST(LloydMax, SphereCoordinateLowDimensions) {
  // dim 3: the coordinate is uniform on [-1, 1]; the optimal 2-level quantizer is +-1/2.
  const ScalarCodebook u = lloyd_max_sphere_coordinate(1, 3);
  EXPECT_NEAR(u.centroids[1], 0.5, 1e-4);
  EXPECT_NEAR(u.distortion, 1.0 / 12, 1e-4);
  // dim 2: arcsine density, infinite at +-1, still integrable.
  const ScalarCodebook a = lloyd_max_sphere_coordinate(1, 2);
  EXPECT_NEAR(a.centroids[1], 2 / M_PI, 1e-3);  // E|cos(theta)|
  EXPECT_THROW(lloyd_max_sphere_coordinate(2, 1), Error);
}

TEST(LloydMax, LaplacianSymmetricAndScaled) {
  for (unsigned bits = 1; bits <= 6; ++bits) expect_sorted_and_symmetric(lloyd_max_laplacian(bits), 1e-4);
  // 1 bit: the centroid is the conditional mean E[x | x > 0] = b.
  EXPECT_NEAR(lloyd_max_laplacian(1).centroids[1], 1.0, 1e-4);
  EXPECT_NEAR(lloyd_max_laplacian(1, 0.25).centroids[1], 0.25, 1e-4);
  // Variance 2 b^2 minus the captured part: 1-bit distortion is 2 - 1 = 1.
  EXPECT_NEAR(lloyd_max_laplacian(1).distortion, 1.0, 1e-3);
  // More bits, less distortion.
  for (unsigned bits = 2; bits <= 6; ++bits)
    EXPECT_LT(lloyd_max_laplacian(bits).distortion, lloyd_max_laplacian(bits - 1).distortion);
}

TEST(LloydMax, ResidualStagesMatchTheResidualVarianceAndJoinIntoOneTable) {
  for (unsigned bits = 1; bits <= 3; ++bits) {
    const ResidualStages s = gaussian_residual_stages(bits);
    EXPECT_EQ(s.gaussian.centroids, lloyd_max_gaussian(bits).centroids);
    // Laplace(0, b) has variance 2 b^2: the second stage's scale is sqrt(D1 / 2).
    const double b = std::sqrt(s.gaussian.distortion / 2);
    EXPECT_EQ(s.laplacian.centroids, lloyd_max_laplacian(bits, b).centroids);
    // Together they quantize N(0, 1) better than the first stage alone.
    EXPECT_LT(s.laplacian.distortion, s.gaussian.distortion);
    const size_t levels = size_t{1} << bits;
    const std::vector<float> table = residual_joint_table(s, bits, 0.5);
    ASSERT_EQ(table.size(), levels * levels);
    for (size_t i2 = 0; i2 < levels; ++i2)
      for (size_t i1 = 0; i1 < levels; ++i1)
        EXPECT_FLOAT_EQ(table[i1 | i2 << bits],
                        0.5f * (s.gaussian.centroids[i1] + s.laplacian.centroids[i2]));
  }
}

TEST(LloydMax, GenericDensityAndDeterminism) {
  const auto pdf = [](double x) { return x * x; };
  const ScalarCodebook a = lloyd_max(pdf, -1, 1, 4), b = lloyd_max(pdf, -1, 1, 4);
  EXPECT_EQ(a.centroids, b.centroids);
  EXPECT_EQ(a.boundaries, b.boundaries);
  const ScalarCodebook one = lloyd_max(pdf, 0, 1, 1);  // the mean of 3x^2 on [0, 1]
  EXPECT_NEAR(one.centroids[0], 0.75, 1e-5);
  EXPECT_TRUE(one.boundaries.empty());
  EXPECT_EQ(one.quantize(0.9f), 0);
}

TEST(LloydMax, RejectsBadArguments) {
  const auto pdf = [](double) { return 1.0; };
  EXPECT_THROW(lloyd_max(pdf, 1, 1, 2), Error);
  EXPECT_THROW(lloyd_max(pdf, 0, 1, 0), Error);
  EXPECT_THROW(lloyd_max(pdf, 0, 1, 257), Error);
  EXPECT_THROW(lloyd_max([](double) { return -1.0; }, 0, 1, 2), Error);
  EXPECT_THROW(lloyd_max([](double) { return 0.0; }, 0, 1, 2), Error);
  EXPECT_THROW(lloyd_max_gaussian(9), Error);
  EXPECT_THROW(lloyd_max_gaussian(2, 0.0), Error);
  EXPECT_THROW(lloyd_max_laplacian(2, -1.0), Error);
}

}  // namespace
}  // namespace veloxquant
