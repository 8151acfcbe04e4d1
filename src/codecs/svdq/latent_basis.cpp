#include "codecs/svdq/latent_basis.h"

#include <Eigen/Dense>

#include <string>

#include "core/half_bytes.h"
#include "core/principal_basis.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::svdq {
namespace {

// fp16 rounding moves the Gram matrix of stored vectors off the identity by about 2^-10; a state
// further off than this was not written by fit_basis_state().
constexpr double kOrthonormalTolerance = 1e-2;

}  // namespace

std::vector<uint8_t> fit_basis_state(const float* x, size_t n, size_t stride, size_t dim,
                                     size_t rank) {
  const std::vector<double> basis = principal_directions(x, n, stride, 1, dim, rank);
  std::vector<uint8_t> state(2 * dim * rank);
  for (size_t i = 0; i < basis.size(); ++i) store_half(state.data() + 2 * i, f32_to_f16(static_cast<float>(basis[i])));
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
  LatentBasis b{dim, rank, std::vector<float>(rank * dim), std::vector<float>(rank * dim), {}};
  for (Eigen::Index j = 0; j < r; ++j)
    for (Eigen::Index i = 0; i < d; ++i) {
      b.up[static_cast<size_t>(j * d + i)] = c * static_cast<float>(v(i, j));
      b.down[static_cast<size_t>(j * d + i)] = static_cast<float>(dual(i, j) / c);
    }
  b.frame = LatentFrame(b.up.data(), dim, rank);
  return b;
}

}  // namespace veloxquant::svdq
