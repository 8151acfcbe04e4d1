#include "core/latent_frame.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/principal_basis.h"
#include "test_data.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

// The leading `rank` principal directions of random vectors, rounded to fp16 as palu and svdq
// store them (orthonormal only to fp16 rounding), times `scale`: [rank][dim].
std::vector<float> stored_basis(size_t dim, size_t rank, float scale) {
  const std::vector<float> x = test::gaussian(4 * dim * dim, 7 + dim);
  const std::vector<double> dirs = principal_directions(x.data(), 4 * dim, dim, 1, dim, rank);
  std::vector<float> b(rank * dim);
  for (size_t i = 0; i < b.size(); ++i) b[i] = scale * f16_to_f32(f32_to_f16(static_cast<float>(dirs[i])));
  return b;
}

// A latent vector y decodes to B y, which the frame holds as [y, 0]; queries and vectors keep
// their products though B is not orthonormal; from_frame undoes to_frame. At a power of two, at
// 80, with B scaled (palu's unit) and at full rank.
TEST(LatentFrame, LatentsAreTheFirstCoordinatesAndProductsAreKept) {
  struct Case {
    size_t dim, rank;
    float scale;
  };
  for (const Case c : {Case{128, 64, 1.0f}, Case{80, 24, 32.0f}, Case{64, 64, 1.0f}}) {
    const size_t d = c.dim, r = c.rank, n = 5;
    const std::vector<float> b = stored_basis(d, r, c.scale);
    const LatentFrame frame(b.data(), d, r);
    const std::vector<float> y = test::gaussian(n * r, 11), x = test::gaussian(n * d, 12),
                             q = test::gaussian(n * d, 13);
    std::vector<float> decoded(n * d, 0.0f);
    for (size_t t = 0; t < n; ++t)
      for (size_t j = 0; j < r; ++j)
        for (size_t i = 0; i < d; ++i) decoded[t * d + i] += y[t * r + j] * b[j * d + i];
    frame.to_frame(decoded.data(), n);
    for (size_t t = 0; t < n; ++t)
      for (size_t i = 0; i < d; ++i)
        ASSERT_NEAR(decoded[t * d + i], i < r ? y[t * r + i] : 0.0f, 2e-5)
            << "d " << d << " token " << t << " column " << i;
    std::vector<float> xf = x, qf = q;
    frame.to_frame(xf.data(), n);
    frame.queries_to_frame(qf.data(), n);
    for (size_t t = 0; t < n; ++t)
      for (size_t u = 0; u < n; ++u) {
        const double want = test::dot(q.data() + t * d, x.data() + u * d, d);
        EXPECT_NEAR(test::dot(qf.data() + t * d, xf.data() + u * d, d), want,
                    1e-4 * std::sqrt(static_cast<double>(d)))
            << "d " << d << " query " << t << " vector " << u;
      }
    frame.from_frame(xf.data(), n);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(xf[i], x[i], 2e-5) << "d " << d << " element " << i;
  }
}

}  // namespace
}  // namespace veloxquant
