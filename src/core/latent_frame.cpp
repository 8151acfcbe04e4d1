#include "core/latent_frame.h"

#include <cblas.h>

#include <Eigen/Dense>
#include <algorithm>

#include "core/blas.h"

namespace veloxquant {
namespace {

blasint ri(size_t x) { return static_cast<blasint>(x); }

// out[n][cols] = x[n][dim] m^T for m [cols][dim].
void times_transposed(const float* x, size_t n, const float* m, size_t cols, size_t dim, float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri(n), ri(cols), ri(dim), 1.0f, x, ri(dim), m, ri(dim),
              0.0f, out, ri(cols));
}

}  // namespace

LatentFrame::LatentFrame(const float* b, size_t dim, size_t rank) : dim_(dim), rank_(rank) {
  const auto d = static_cast<Eigen::Index>(dim), r = static_cast<Eigen::Index>(rank);
  Eigen::MatrixXd basis(d, r);
  for (Eigen::Index j = 0; j < r; ++j)
    for (Eigen::Index i = 0; i < d; ++i) basis(i, j) = b[j * d + i];
  // The Q of a Householder QR: its columns past `rank` are orthonormal and orthogonal to span(B).
  const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(basis).householderQ();
  rows_.resize(dim * dim);
  std::copy_n(b, dim * rank, rows_.begin());
  for (Eigen::Index k = r; k < d; ++k)
    for (Eigen::Index i = 0; i < d; ++i) rows_[static_cast<size_t>(k * d + i)] = static_cast<float>(q(i, k));
  const Eigen::MatrixXd inv = (basis.transpose() * basis).inverse();
  gram_inv_.resize(rank * rank);
  for (Eigen::Index j = 0; j < r; ++j)
    for (Eigen::Index k = 0; k < r; ++k)
      gram_inv_[static_cast<size_t>(j * r + k)] = static_cast<float>(inv(j, k));
}

void LatentFrame::queries_to_frame(float* x, size_t n) const {
  if (n == 0) return;
  configure_blas();
  std::vector<float> y(n * dim_);
  times_transposed(x, n, rows_.data(), dim_, dim_, y.data());
  std::copy(y.begin(), y.end(), x);
}

void LatentFrame::to_frame(float* x, size_t n) const {
  if (n == 0) return;
  configure_blas();
  std::vector<float> y(n * dim_), latent(n * rank_);
  times_transposed(x, n, rows_.data(), dim_, dim_, y.data());
  for (size_t t = 0; t < n; ++t) std::copy_n(y.data() + t * dim_, rank_, latent.data() + t * rank_);
  // (B^T B)^-1 is symmetric: the rows times it, transposed or not.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(n), ri(rank_), ri(rank_), 1.0f, latent.data(),
              ri(rank_), gram_inv_.data(), ri(rank_), 0.0f, y.data(), ri(dim_));
  std::copy(y.begin(), y.end(), x);
}

void LatentFrame::from_frame(float* x, size_t n) const {
  if (n == 0) return;
  configure_blas();
  std::vector<float> y(x, x + n * dim_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(n), ri(dim_), ri(dim_), 1.0f, y.data(), ri(dim_),
              rows_.data(), ri(dim_), 0.0f, x, ri(dim_));
}

}  // namespace veloxquant
