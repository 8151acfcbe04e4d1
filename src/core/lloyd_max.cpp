#include "core/lloyd_max.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "core/precomputed.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

// A codebook as a precomputed table: centroid count, centroids, boundaries, distortion. A
// one-level codebook has no boundaries, and memcpy may not be handed their null data().
void copy_bytes(void* to, const void* from, size_t n) {
  if (n > 0) std::memcpy(to, from, n);
}

Table codebook_table(const ScalarCodebook& cb) {
  const uint32_t n = static_cast<uint32_t>(cb.centroids.size());
  Table t(4 + (2 * size_t{n} - 1) * sizeof(float) + sizeof(double));
  uint8_t* p = t.data();
  std::memcpy(p, &n, 4);
  copy_bytes(p += 4, cb.centroids.data(), n * sizeof(float));
  copy_bytes(p += n * sizeof(float), cb.boundaries.data(), (n - 1) * sizeof(float));
  std::memcpy(p + (n - 1) * sizeof(float), &cb.distortion, sizeof(double));
  return t;
}

ScalarCodebook codebook_of(const Table& t) {
  uint32_t n;
  std::memcpy(&n, t.data(), 4);
  ScalarCodebook cb;
  cb.centroids.resize(n);
  cb.boundaries.resize(n - 1);
  const uint8_t* p = t.data() + 4;
  copy_bytes(cb.centroids.data(), p, n * sizeof(float));
  copy_bytes(cb.boundaries.data(), p += n * sizeof(float), (n - 1) * sizeof(float));
  std::memcpy(&cb.distortion, p + (n - 1) * sizeof(float), sizeof(double));
  return cb;
}

// Cells of the integration grid. The midpoint rule on 2^16 cells keeps the conditional means and
// the distortion well inside 1e-4 relative for the densities used here, and never evaluates the
// density at an endpoint (the arcsine density of dim = 2 is infinite there).
constexpr size_t kCells = size_t{1} << 16;
constexpr int kMaxIterations = 20000;

// Prefix sums of the mass and of the first and second moments of a density discretized on
// uniform cells; partial cells are treated as uniformly filled, so sums at any point are exact
// for the discretized density.
class GridMoments {
 public:
  GridMoments(const std::function<double(double)>& pdf, double lo, double hi)
      : lo_(lo), h_((hi - lo) / kCells), mass_(kCells), cum0_(kCells + 1), cum1_(kCells + 1),
        cum2_(kCells + 1) {
    double total = 0;
    for (size_t i = 0; i < kCells; ++i) {
      const double p = pdf(center(i));
      if (!(p >= 0) || !std::isfinite(p)) {
        throw Error("lloyd_max: density is " + std::to_string(p) + " at x = " +
                    std::to_string(center(i)) + "; expected a finite value >= 0");
      }
      mass_[i] = p * h_;
      total += mass_[i];
    }
    if (!(total > 0)) throw Error("lloyd_max: density integrates to 0 on the interval");
    for (size_t i = 0; i < kCells; ++i) {
      const double m = mass_[i] / total, x = center(i);
      mass_[i] = m;
      cum0_[i + 1] = cum0_[i] + m;
      cum1_[i + 1] = cum1_[i] + m * x;
      cum2_[i + 1] = cum2_[i] + m * (x * x + h_ * h_ / 12);
    }
  }

  // Mass and moments of the part of the density below t: {P, E[x; x<t], E[x^2; x<t]}.
  struct Moments {
    double m0, m1, m2;
  };
  Moments below(double t) const {
    const double u = (t - lo_) / h_;
    if (u <= 0) return {0, 0, 0};
    if (u >= static_cast<double>(kCells)) return {cum0_[kCells], cum1_[kCells], cum2_[kCells]};
    const size_t i = static_cast<size_t>(u);
    const double frac = u - static_cast<double>(i);
    const double m = mass_[i] * frac;
    const double left = lo_ + static_cast<double>(i) * h_, len = frac * h_;
    const double mid = left + len / 2;
    return {cum0_[i] + m, cum1_[i] + m * mid, cum2_[i] + m * (mid * mid + len * len / 12)};
  }

  // Smallest x with P(X < x) >= p, for starting centroids at quantiles.
  double quantile(double p) const {
    const size_t i = static_cast<size_t>(
        std::lower_bound(cum0_.begin(), cum0_.end(), p) - cum0_.begin());
    return center(std::min(i == 0 ? 0 : i - 1, kCells - 1));
  }

 private:
  double center(size_t i) const { return lo_ + (static_cast<double>(i) + 0.5) * h_; }

  double lo_, h_;
  std::vector<double> mass_, cum0_, cum1_, cum2_;
};

void check_bits(unsigned bits, const char* what) {
  if (bits > 8) {
    throw Error(std::string(what) + ": bits " + std::to_string(bits) + "; expected 0..8");
  }
}

}  // namespace

uint8_t ScalarCodebook::quantize(float x) const {
  // Boundaries are the midpoints, so the cell containing x (the number of boundaries <= x) is its
  // nearest centroid. Branch-free binary search: encoders call this once per coordinate, and the
  // comparisons of a branching search are unpredictable.
  size_t n = boundaries.size();
  if (n == 0) return 0;
  const float* base = boundaries.data();
  while (n > 1) {
    const size_t half = n / 2;
    base = base[half - 1] <= x ? base + half : base;
    n -= half;
  }
  return static_cast<uint8_t>((base - boundaries.data()) + (*base <= x ? 1 : 0));
}

ScalarCodebook lloyd_max(const std::function<double(double)>& pdf, double lo, double hi,
                         size_t levels) {
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi)) {
    throw Error("lloyd_max: interval [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "]; expected finite lo < hi");
  }
  if (levels < 1 || levels > 256) {
    throw Error("lloyd_max: levels " + std::to_string(levels) + "; expected 1..256");
  }
  const GridMoments grid(pdf, lo, hi);
  std::vector<double> c(levels), b(levels + 1);
  for (size_t k = 0; k < levels; ++k) {
    c[k] = grid.quantile((static_cast<double>(k) + 0.5) / static_cast<double>(levels));
  }
  b.front() = lo;
  b.back() = hi;
  const double tolerance = 1e-12 * (hi - lo);
  for (int it = 0; it < kMaxIterations; ++it) {
    for (size_t k = 1; k < levels; ++k) b[k] = (c[k - 1] + c[k]) / 2;
    double moved = 0;
    GridMoments::Moments prev = grid.below(b[0]);
    for (size_t k = 0; k < levels; ++k) {
      const GridMoments::Moments next = grid.below(b[k + 1]);
      const double mass = next.m0 - prev.m0;
      // A cell with no mass keeps its centroid; it cannot improve the distortion either way.
      if (mass > 0) {
        const double mean = std::clamp((next.m1 - prev.m1) / mass, b[k], b[k + 1]);
        moved = std::max(moved, std::abs(mean - c[k]));
        c[k] = mean;
      }
      prev = next;
    }
    if (moved <= tolerance) break;
  }
  for (size_t k = 1; k < levels; ++k) b[k] = (c[k - 1] + c[k]) / 2;

  ScalarCodebook cb;
  cb.centroids.assign(c.begin(), c.end());
  for (size_t k = 1; k < levels; ++k) cb.boundaries.push_back(static_cast<float>(b[k]));
  // Distortion of the codebook as it will be used: float centroids, float boundaries.
  double distortion = 0;
  GridMoments::Moments prev = grid.below(lo);
  for (size_t k = 0; k < levels; ++k) {
    const double upper = k + 1 < levels ? static_cast<double>(cb.boundaries[k]) : hi;
    const GridMoments::Moments next = grid.below(upper);
    const double ck = cb.centroids[k];
    distortion += (next.m2 - prev.m2) - 2 * ck * (next.m1 - prev.m1) + ck * ck * (next.m0 - prev.m0);
    prev = next;
  }
  cb.distortion = std::max(0.0, distortion);
  return cb;
}

ScalarCodebook lloyd_max_gaussian(unsigned bits, double sigma) {
  check_bits(bits, "lloyd_max_gaussian");
  if (!(sigma > 0) || !std::isfinite(sigma)) {
    throw Error("lloyd_max_gaussian: sigma " + std::to_string(sigma) + "; expected > 0");
  }
  // Beyond 12 sigma the mass (1e-33) is far below double rounding of the moments.
  const TableKey key{TableKind::GaussianCodebook, 0, bits, std::bit_cast<uint64_t>(sigma)};
  return codebook_of(precomputed_table(key, [&] {
    return codebook_table(lloyd_max([sigma](double x) { return std::exp(-0.5 * (x / sigma) * (x / sigma)); },
                                    -12 * sigma, 12 * sigma, size_t{1} << bits));
  }));
}

ScalarCodebook lloyd_max_laplacian(unsigned bits, double b) {
  check_bits(bits, "lloyd_max_laplacian");
  if (!(b > 0) || !std::isfinite(b)) {
    throw Error("lloyd_max_laplacian: scale " + std::to_string(b) + "; expected > 0");
  }
  // Mass beyond 40 b is e^-40; the outermost of 256 levels sits near 20 b.
  return lloyd_max([b](double x) { return std::exp(-std::abs(x) / b); }, -40 * b, 40 * b,
                   size_t{1} << bits);
}

ScalarCodebook lloyd_max_sphere_coordinate(unsigned bits, size_t dim) {
  check_bits(bits, "lloyd_max_sphere_coordinate");
  if (dim < 2) {
    throw Error("lloyd_max_sphere_coordinate: dim " + std::to_string(dim) + "; expected >= 2");
  }
  const double power = (static_cast<double>(dim) - 3) / 2;
  // The density concentrates at scale 1/sqrt(dim); beyond 14 standard deviations its mass is
  // below 1e-40, so the grid spends its cells where the levels are.
  const double reach = std::min(1.0, 14.0 / std::sqrt(static_cast<double>(dim)));
  // Evaluated through the logarithm so that large powers do not underflow before normalizing.
  return codebook_of(precomputed_table({TableKind::SphereCodebook, dim, bits, 0}, [&] {
    return codebook_table(lloyd_max(
        [power](double x) {
          const double s = 1 - x * x;
          return s <= 0 ? 0.0 : std::exp(power * std::log(s));
        },
        -reach, reach, size_t{1} << bits));
  }));
}

ResidualStages gaussian_residual_stages(unsigned bits) {
  ResidualStages s;
  s.gaussian = lloyd_max_gaussian(bits);
  // Laplace(0, b) has variance 2 b^2; match it to the first stage's residual variance.
  s.laplacian = lloyd_max_laplacian(bits, std::sqrt(s.gaussian.distortion / 2));
  return s;
}

std::vector<float> residual_joint_table(const ResidualStages& s, unsigned bits, double scale) {
  const size_t levels = size_t{1} << bits;
  std::vector<float> table(levels * levels);
  for (size_t i2 = 0; i2 < levels; ++i2)
    for (size_t i1 = 0; i1 < levels; ++i1)
      table[i1 | i2 << bits] = static_cast<float>(
          (static_cast<double>(s.gaussian.centroids[i1]) + s.laplacian.centroids[i2]) * scale);
  return table;
}

}  // namespace veloxquant
