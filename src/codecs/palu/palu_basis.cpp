#include "codecs/palu/palu_basis.h"

#include <Eigen/Dense>

#include <cmath>

#include "core/rotation.h"

namespace veloxquant::palu {
namespace {

// Eigenvalues of the Gram matrix below this fraction of the largest are rounding noise of
// directions the data does not span (double precision leaves about 1e-16 of the largest).
constexpr double kSpannedRelative = 1e-10;

}  // namespace

void hadamard_blocks(float* x, size_t m) {
  size_t at = 0;
  for (size_t block = size_t{1} << 62; block > 1; block >>= 1) {
    if ((m - at) & block) {
      fwht(x + at, block);
      at += block;
    }
  }
}

std::vector<float> fit_basis(const float* x, size_t n, size_t heads, size_t first, size_t count,
                             size_t dim, size_t rank, size_t hi, bool hadamard) {
  const auto d = static_cast<Eigen::Index>(dim);
  Eigen::MatrixXd stacked(static_cast<Eigen::Index>(n * count), d);
  Eigen::Index row = 0;
  for (size_t t = 0; t < n; ++t)
    for (size_t h = first; h < first + count; ++h)
      stacked.row(row++) = Eigen::Map<const Eigen::RowVectorXf>(x + (t * heads + h) * dim, d).cast<double>();
  const Eigen::MatrixXd gram = stacked.transpose() * stacked;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);  // eigenvalues ascending
  const double largest = eig.eigenvalues()(d - 1);

  Eigen::MatrixXd basis(d, static_cast<Eigen::Index>(rank));
  Eigen::Index filled = 0;
  for (Eigen::Index k = d - 1; k >= 0 && filled < basis.cols(); --k) {
    if (!(largest > 0) || eig.eigenvalues()(k) <= kSpannedRelative * largest) break;
    Eigen::VectorXd v = eig.eigenvectors().col(k);
    Eigen::Index top = 0;
    v.cwiseAbs().maxCoeff(&top);  // first index of the largest magnitude
    if (v(top) < 0) v = -v;
    basis.col(filled++) = v;
  }
  // Completion: the standard axis with the most left outside the columns so far (the longest
  // column of the complement projector, the first on ties), its remainder normalized; once more
  // orthogonalized against the columns for rounding.
  Eigen::MatrixXd outside =
      Eigen::MatrixXd::Identity(d, d) - basis.leftCols(filled) * basis.leftCols(filled).transpose();
  while (filled < basis.cols()) {
    Eigen::Index axis = 0;
    outside.colwise().norm().maxCoeff(&axis);
    Eigen::VectorXd v = outside.col(axis);
    for (Eigen::Index j = 0; j < filled; ++j) v -= basis.col(j).dot(v) * basis.col(j);
    v.normalize();
    basis.col(filled++) = v;
    outside -= v * v.transpose();
  }

  std::vector<float> out(dim * rank);
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMajor>(out.data(), d, basis.cols()) = basis.cast<float>();
  // Row c holds channel c's weight in every latent: rotating the latents of a part by H
  // (symmetric) multiplies the part's segment of every row by H.
  for (size_t c = 0; hadamard && c < dim; ++c) {
    hadamard_blocks(out.data() + c * rank, hi);
    hadamard_blocks(out.data() + c * rank + hi, rank - hi);
  }
  return out;
}

}  // namespace veloxquant::palu
