#include "core/principal_basis.h"

#include <Eigen/Dense>

namespace veloxquant {
namespace {

// Eigenvalues of the Gram matrix below this fraction of the largest are rounding noise of
// directions the vectors do not span (double precision leaves about 1e-16 of the largest).
constexpr double kSpannedRelative = 1e-10;

}  // namespace

std::vector<double> principal_directions(const float* x, size_t n, size_t stride, size_t count,
                                         size_t dim, size_t rank) {
  const auto d = static_cast<Eigen::Index>(dim), r = static_cast<Eigen::Index>(rank);
  Eigen::MatrixXd rows(static_cast<Eigen::Index>(n * count), d);
  for (size_t t = 0; t < n; ++t)
    for (size_t j = 0; j < count; ++j)
      rows.row(static_cast<Eigen::Index>(t * count + j)) =
          Eigen::Map<const Eigen::RowVectorXf>(x + t * stride + j * dim, d).cast<double>();
  // The right singular vectors are the Gram matrix's eigenvectors: d x d however many rows.
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(d, d);
  gram.selfadjointView<Eigen::Lower>().rankUpdate(rows.transpose());
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
  const Eigen::VectorXd& lambda = eig.eigenvalues();  // ascending
  const double largest = lambda(d - 1);
  Eigen::MatrixXd basis(d, r);
  Eigen::Index found = 0;
  while (found < r && lambda(d - 1 - found) > kSpannedRelative * largest) {  // none when all zero
    basis.col(found) = eig.eigenvectors().col(d - 1 - found);
    ++found;
  }
  if (found < r) {
    // The Q of a Householder QR of the directions found: its first `found` columns span them and
    // the next ones are orthonormal to them.
    Eigen::MatrixXd q = Eigen::MatrixXd::Identity(d, d);
    if (found > 0) q = Eigen::HouseholderQR<Eigen::MatrixXd>(basis.leftCols(found)).householderQ();
    basis.rightCols(r - found) = q.middleCols(found, r - found);
  }
  std::vector<double> out(rank * dim);
  for (Eigen::Index j = 0; j < r; ++j) {
    Eigen::Index at = 0;
    basis.col(j).cwiseAbs().maxCoeff(&at);
    const double sign = basis(at, j) < 0 ? -1.0 : 1.0;
    for (Eigen::Index i = 0; i < d; ++i) out[static_cast<size_t>(j * d + i)] = sign * basis(i, j);
  }
  return out;
}

float latent_scale(size_t dim) {
  float c = 1.0f;
  while (static_cast<double>(c) * c < 4.0 * static_cast<double>(dim)) c *= 2.0f;
  return c;
}

}  // namespace veloxquant
