#include "core/rotation.h"

#include <Eigen/Dense>
#include <cmath>

#include "core/precomputed.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {

bool is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

void fwht(float* x, size_t n) {
  for (size_t h = 1; h < n; h <<= 1) {
    for (size_t i = 0; i < n; i += 2 * h) {
      for (size_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float s = 1.0f / std::sqrt(static_cast<float>(n));
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

std::vector<float> random_orthogonal(size_t d, uint64_t seed) {
  Rng rng(seed);
  Eigen::MatrixXd g(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(d));
  for (Eigen::Index i = 0; i < g.rows(); ++i)
    for (Eigen::Index j = 0; j < g.cols(); ++j) g(i, j) = rng.normal();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(g);
  Eigen::MatrixXd q = qr.householderQ();
  const Eigen::MatrixXd& r = qr.matrixQR();
  // Multiply column j by sign(R_jj) so the distribution is Haar, not biased by QR's convention.
  for (Eigen::Index j = 0; j < q.cols(); ++j)
    if (r(j, j) < 0) q.col(j) = -q.col(j);
  std::vector<float> out(d * d);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j)
      out[i * d + j] = static_cast<float>(q(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)));
  return out;
}

Rotation::Rotation(size_t dim, uint64_t seed) : dim_(dim) {
  if (dim == 0) throw Error("rotation dimension 0; expected at least 1");
  const Table table = precomputed_table({TableKind::Rotation, dim, 0, seed}, [&] {
    if (!is_power_of_two(dim)) return table_of(random_orthogonal(dim, seed));
    Rng rng(seed);
    std::vector<float> signs(dim);
    for (auto& s : signs) s = rng.sign();
    return table_of(signs);
  });
  (is_power_of_two(dim) ? signs_ : dense_) = floats_of(table);
}

void Rotation::forward(float* x, size_t rows) const {
  std::vector<float> tmp(dense_.empty() ? 0 : dim_);
  for (size_t r = 0; r < rows; ++r) {
    float* v = x + r * dim_;
    if (dense_.empty()) {
      for (size_t i = 0; i < dim_; ++i) v[i] *= signs_[i];
      fwht(v, dim_);
    } else {
      for (size_t i = 0; i < dim_; ++i) {
        float s = 0;
        for (size_t j = 0; j < dim_; ++j) s += dense_[i * dim_ + j] * v[j];
        tmp[i] = s;
      }
      std::copy(tmp.begin(), tmp.end(), v);
    }
  }
}

void Rotation::inverse(float* x, size_t rows) const {
  std::vector<float> tmp(dense_.empty() ? 0 : dim_);
  for (size_t r = 0; r < rows; ++r) {
    float* v = x + r * dim_;
    if (dense_.empty()) {
      fwht(v, dim_);
      for (size_t i = 0; i < dim_; ++i) v[i] *= signs_[i];
    } else {
      for (size_t j = 0; j < dim_; ++j) tmp[j] = 0;
      for (size_t i = 0; i < dim_; ++i)
        for (size_t j = 0; j < dim_; ++j) tmp[j] += dense_[i * dim_ + j] * v[i];
      std::copy(tmp.begin(), tmp.end(), v);
    }
  }
}

size_t Rotation::state_bytes() const {
  return dense_.empty() ? (dim_ + 7) / 8 : dense_.size() * sizeof(float);
}

}  // namespace veloxquant
