// SpectralQuant's calibration of one KV head. The keys are taken as the cache encodes them,
// after RoPE, and as unit vectors (the record keeps each key's norm apart, as TurboQuant's
// does). Their covariance's eigenvectors, largest eigenvalue first, are the rotation; reverse
// water-filling on the eigenvalues gives each direction its bits (allocate()). Each signal
// direction's levels are Lloyd-Max over its own calibration coordinates (1-D k-means, which
// Lloyd's algorithm on an empirical distribution is); the noise directions, near-Gaussian and
// many, are each standardized by their mean and deviation and share one Lloyd-Max codebook per
// width fitted to all of them together.
#include "codecs/spectral/spectral_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "core/nuq_levels.h"
#include "codecs/spectral/bit_allocation.h"
#include "codecs/spectral/spectral_key_codec.h"

namespace veloxquant::spectral {
namespace {

std::vector<float> lloyd_max_levels(const std::vector<float>& samples, unsigned bits) {
  const std::vector<float> ones(samples.size(), 1.0f);
  return weighted_kmeans_1d(samples, ones, size_t{1} << bits);
}

}  // namespace

size_t Allocation::signal_levels() const {
  size_t n = 0;
  for (size_t j = 0; j < signal; ++j) n += size_t{1} << bits[j];
  return n;
}

size_t Allocation::noise_levels() const {
  size_t n = 0;
  for (unsigned w : noise_widths) n += size_t{1} << w;
  return n;
}

Allocation allocate(std::span<const float> eigenvalues, const AllocationRule& rule) {
  const std::vector<double> variances(eigenvalues.begin(), eigenvalues.end());
  Allocation a;
  a.bits = rule.water_fill ? water_fill_bits(variances, rule.bits * variances.size())
                           : std::vector<unsigned>(variances.size(), rule.bits);
  a.signal = rule.signal ? rule.signal : participation_signal_count(variances);
  for (size_t j = a.signal; j < a.bits.size(); ++j) a.noise_widths.push_back(a.bits[j]);
  std::sort(a.noise_widths.begin(), a.noise_widths.end());
  a.noise_widths.erase(std::unique(a.noise_widths.begin(), a.noise_widths.end()), a.noise_widths.end());
  return a;
}

FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t d, const AllocationRule& rule) {
  const auto dd = static_cast<Eigen::Index>(d);
  // The unit keys; a text of zero keys alone leaves one zero row, so every table is still fitted.
  std::vector<float> units;
  for (size_t t = 0; t < tokens; ++t) {
    const float* x = keys + t * stride;
    double sq = 0;
    for (size_t c = 0; c < d; ++c) sq += static_cast<double>(x[c]) * x[c];
    if (!(sq > 0)) continue;
    const double inv = 1 / std::sqrt(sq);
    for (size_t c = 0; c < d; ++c) units.push_back(static_cast<float>(x[c] * inv));
  }
  if (units.empty()) units.assign(d, 0.0f);
  const size_t n = units.size() / d;
  const Eigen::MatrixXd u =
      Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(units.data(),
                                                                                            static_cast<Eigen::Index>(n), dd)
          .cast<double>();
  const Eigen::RowVectorXd mean = u.colwise().mean();
  const Eigen::MatrixXd centred = u.rowwise() - mean;
  const Eigen::MatrixXd cov = centred.transpose() * centred / static_cast<double>(n);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);

  FittedHead f;
  f.rotation.resize(d * d);
  f.eigenvalues.resize(d);
  for (size_t j = 0; j < d; ++j) {  // descending; each with its largest-magnitude element positive
    const Eigen::Index col = dd - 1 - static_cast<Eigen::Index>(j);
    const Eigen::VectorXd v = eig.eigenvectors().col(col);
    Eigen::Index at = 0;
    v.cwiseAbs().maxCoeff(&at);
    const double sign = v(at) < 0 ? -1.0 : 1.0;
    for (size_t c = 0; c < d; ++c) f.rotation[j * d + c] = static_cast<float>(sign * v(static_cast<Eigen::Index>(c)));
    f.eigenvalues[j] = static_cast<float>(std::max(eig.eigenvalues()(col), 0.0));
  }

  // The coordinates encode() will quantize: the unit keys rotated by the stored f32 rotation.
  std::vector<std::vector<float>> coords(d, std::vector<float>(n));
  std::vector<float> y(d);
  for (size_t t = 0; t < n; ++t) {
    rotate(f.rotation, units.data() + t * d, y.data(), d);
    for (size_t j = 0; j < d; ++j) coords[j][t] = y[j];
  }
  const Allocation a = allocate(f.eigenvalues, rule);
  for (size_t j = 0; j < a.signal; ++j) {
    const std::vector<float> levels = lloyd_max_levels(coords[j], a.bits[j]);
    f.signal_levels.insert(f.signal_levels.end(), levels.begin(), levels.end());
  }
  for (size_t j = a.signal; j < d; ++j) {
    double sum = 0, sq = 0;
    for (float v : coords[j]) sum += v;
    const double centre = sum / static_cast<double>(n);
    for (float v : coords[j]) sq += (v - centre) * (v - centre);
    const double deviation = std::sqrt(sq / static_cast<double>(n));
    f.noise_center.push_back(static_cast<float>(centre));
    // A direction the keys do not move along: any positive scale reproduces its centre.
    f.noise_scale.push_back(deviation > 0 ? static_cast<float>(deviation) : 1.0f);
  }
  for (unsigned w : a.noise_widths) {
    std::vector<float> pooled;
    for (size_t j = a.signal; j < d; ++j) {
      if (a.bits[j] != w) continue;
      const float centre = f.noise_center[j - a.signal], scale = f.noise_scale[j - a.signal];
      for (float v : coords[j]) pooled.push_back((v - centre) / scale);
    }
    const std::vector<float> levels = lloyd_max_levels(pooled, w);
    f.noise_levels.insert(f.noise_levels.end(), levels.begin(), levels.end());
  }
  return f;
}

}  // namespace veloxquant::spectral
