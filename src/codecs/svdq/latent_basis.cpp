#include "codecs/svdq/latent_basis.h"

#include <Eigen/Dense>

#include <string>

#include "core/half_bytes.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::svdq {
namespace {

// Eigenvalues of K^T K below this fraction of the largest belong to singular values under 1e-6 of
// the largest: numerically zero, with arbitrary eigenvectors, so the completion replaces them.
constexpr double kNullEigenvalue = 1e-12;
// fp16 rounding moves the Gram matrix of stored vectors off the identity by about 2^-10; a state
// further off than this was not written by fit_basis_state().
constexpr double kOrthonormalTolerance = 1e-2;

// An eigenvector's sign is arbitrary: fix it so the first largest-magnitude element is positive.
void make_canonical(Eigen::Ref<Eigen::VectorXd> v) {
  Eigen::Index at = 0;
  v.cwiseAbs().maxCoeff(&at);
  if (v(at) < 0) v = -v;
}

}  // namespace

float latent_scale(size_t dim) {
  float c = 1.0f;
  while (static_cast<double>(c) * c < 4.0 * static_cast<double>(dim)) c *= 2.0f;
  return c;
}

std::vector<uint8_t> fit_basis_state(const float* x, size_t n, size_t stride, size_t dim,
                                     size_t rank) {
  const auto d = static_cast<Eigen::Index>(dim), r = static_cast<Eigen::Index>(rank);
  Eigen::MatrixXd keys(static_cast<Eigen::Index>(n), d);
  for (Eigen::Index t = 0; t < keys.rows(); ++t)
    for (Eigen::Index i = 0; i < d; ++i) keys(t, i) = x[static_cast<size_t>(t) * stride + static_cast<size_t>(i)];
  // The right singular vectors of K are the eigenvectors of K^T K, d x d however long the prompt.
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(d, d);
  gram.selfadjointView<Eigen::Lower>().rankUpdate(keys.transpose());
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(gram);
  const Eigen::VectorXd& lambda = eig.eigenvalues();  // ascending
  const double largest = lambda(d - 1);
  Eigen::MatrixXd basis(d, r);
  Eigen::Index found = 0;
  while (found < r && lambda(d - 1 - found) > kNullEigenvalue * largest) {  // none when all zero
    basis.col(found) = eig.eigenvectors().col(d - 1 - found);
    ++found;
  }
  if (found < r) {
    // Q of a Householder QR of the vectors found: its first `found` columns span them, the next
    // ones are orthonormal to them and depend on nothing else.
    Eigen::MatrixXd q = Eigen::MatrixXd::Identity(d, d);
    if (found > 0) q = Eigen::HouseholderQR<Eigen::MatrixXd>(basis.leftCols(found)).householderQ();
    basis.rightCols(r - found) = q.middleCols(found, r - found);
  }
  std::vector<uint8_t> state(2 * dim * rank);
  for (Eigen::Index j = 0; j < r; ++j) {
    make_canonical(basis.col(j));
    for (Eigen::Index i = 0; i < d; ++i)
      store_half(state.data() + 2 * (j * d + i), f32_to_f16(static_cast<float>(basis(i, j))));
  }
  return state;
}

LatentBasis read_basis_state(const std::vector<uint8_t>& state, size_t dim, size_t rank,
                             size_t head) {
  const std::string at = "svdq: key basis of head " + std::to_string(head) + ": ";
  if (state.size() != 2 * dim * rank) {
    throw Error(at + std::to_string(state.size()) + " bytes; expected " + std::to_string(2 * dim * rank) +
                " (" + std::to_string(rank) + " fp16 vectors of head_dim " + std::to_string(dim) + ")");
  }
  const auto d = static_cast<Eigen::Index>(dim), r = static_cast<Eigen::Index>(rank);
  Eigen::MatrixXd v(d, r);
  for (Eigen::Index j = 0; j < r; ++j)
    for (Eigen::Index i = 0; i < d; ++i) {
      const uint16_t h = load_half(state.data() + 2 * (j * d + i));
      if ((h & 0x7C00) == 0x7C00) {
        throw Error(at + "vector " + std::to_string(j) + ", element " + std::to_string(i) +
                    " is not finite; expected an element of an orthonormal vector");
      }
      v(i, j) = f16_to_f32(h);
    }
  const Eigen::MatrixXd gram = v.transpose() * v;
  const double off = (gram - Eigen::MatrixXd::Identity(r, r)).cwiseAbs().maxCoeff();
  if (!(off <= kOrthonormalTolerance)) {
    throw Error(at + "the vectors are not orthonormal: their Gram matrix is " + std::to_string(off) +
                " off the identity; expected at most " + std::to_string(kOrthonormalTolerance));
  }
  const Eigen::MatrixXd dual = v * gram.llt().solve(Eigen::MatrixXd::Identity(r, r));
  const float c = latent_scale(dim);
  LatentBasis b{dim, rank, std::vector<float>(rank * dim), std::vector<float>(rank * dim)};
  for (Eigen::Index j = 0; j < r; ++j)
    for (Eigen::Index i = 0; i < d; ++i) {
      b.up[static_cast<size_t>(j * d + i)] = c * static_cast<float>(v(i, j));
      b.down[static_cast<size_t>(j * d + i)] = static_cast<float>(dual(i, j) / c);
    }
  return b;
}

}  // namespace veloxquant::svdq
