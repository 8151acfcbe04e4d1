#include "codecs/turboquant/turboquant_prod_codec.h"

#include <cblas.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "codecs/turboquant/nearest_level.h"
#include "codecs/turboquant/rotated_table_codec.h"
#include "core/bitpack.h"
#include "core/blas.h"
#include "core/rng.h"
#include "core/simd.h"
#include "veloxquant/error.h"

namespace veloxquant::turboquant {
namespace {
constexpr size_t kHeader = 2 * sizeof(float);  // norm, residual norm
constexpr size_t kDecodeRun = 256;             // tokens per sketch product

float read_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

std::vector<float> TurboQuantProdCodec::sketch_matrix(size_t dim, uint64_t sketch_seed) {
  return gaussian_matrix(dim, dim, sketch_seed);
}

ScalarCodebook TurboQuantProdCodec::mse_codebook(unsigned bits, size_t dim) {
  if (bits <= 1) return ScalarCodebook{{0.0f}, {}, 1.0 / static_cast<double>(dim)};
  return lloyd_max_sphere_coordinate(bits - 1, dim);
}

TurboQuantProdCodec::TurboQuantProdCodec(size_t dim, unsigned bits, uint64_t rotation_seed,
                                         uint64_t sketch_seed)
    : TurboQuantProdCodec(dim, bits, mse_codebook(bits, dim), rotation_seed, sketch_seed) {}

TurboQuantProdCodec::TurboQuantProdCodec(size_t dim, unsigned bits,
                                         const ScalarCodebook& mse_codebook,
                                         uint64_t rotation_seed, uint64_t sketch_seed)
    : dim_(dim), mse_bits_(bits - 1), codebook_(mse_codebook), rotation_(dim, rotation_seed),
      sketch_(sketch_matrix(dim, sketch_seed)),
      qjl_factor_(static_cast<float>(std::sqrt(std::numbers::pi / 2) / static_cast<double>(dim))),
      mse_bytes_(mse_bits_ ? packed_bytes(dim, mse_bits_) : 0),
      stride_(kHeader + mse_bytes_ + packed_bytes(dim, 1)),
      mse_format_{stride_, 0, kHeader},
      sign_format_{stride_, sizeof(float), kHeader + mse_bytes_},
      sign_kernel_(dim, 1, {-1.0f, 1.0f}) {
  if (mse_bits_) mse_kernel_.emplace(dim, mse_bits_, codebook_.centroids);
}

size_t TurboQuantProdCodec::state_bytes() const {
  return rotation_.state_bytes() + codebook_.centroids.size() * sizeof(float) +
         sketch_.size() * sizeof(float);
}

void TurboQuantProdCodec::sketch(const float* v, float* out) const {
  for (size_t j = 0; j < dim_; ++j) out[j] = simd::dot(sketch_.data() + j * dim_, v, dim_);
}

void TurboQuantProdCodec::sketch_transpose(const float* v, float* out) const {
  for (size_t j = 0; j < dim_; ++j) simd::axpy(v[j], sketch_.data() + j * dim_, out, dim_);
}

void TurboQuantProdCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  std::vector<float> y(dim_), sr(dim_);
  std::vector<uint8_t> idx(dim_), signs(dim_);
  for (size_t t = 0; t < n; ++t) {
    const float norm = rotate_to_unit(rotation_, x + t * dim_, y.data());
    nearest_levels(codebook_, y.data(), dim_, idx.data());
    double residual = 0;
    for (size_t c = 0; c < dim_; ++c) {
      y[c] -= codebook_.value(idx[c]);  // y now holds the residual r
      residual += static_cast<double>(y[c]) * y[c];
    }
    sketch(y.data(), sr.data());
    for (size_t j = 0; j < dim_; ++j) signs[j] = sr[j] >= 0 ? 1 : 0;
    const float rho = norm * static_cast<float>(std::sqrt(residual));
    uint8_t* rec = codes + t * stride_;
    std::memcpy(rec, &norm, sizeof norm);
    std::memcpy(rec + sizeof(float), &rho, sizeof rho);
    if (mse_bits_) pack_bits(idx.data(), dim_, mse_bits_, rec + kHeader);
    pack_bits(signs.data(), dim_, 1, rec + kHeader + mse_bytes_);
  }
}

void TurboQuantProdCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * stride_;
    for (const float v : {read_f32(rec), read_f32(rec + sizeof(float))}) {
      if (!(v >= 0) || !std::isfinite(v)) {
        throw Error(fmt::format("turboquant_prod: corrupt codes: token {} stores norms {} and {}; "
                                "expected finite norms >= 0", t, read_f32(rec),
                                read_f32(rec + sizeof(float))));
      }
    }
  }
}

// In the rotated basis a token is ||x|| y_mse + sqrt(pi/2)/dim rho S^T z. The sketch terms of a
// run of tokens are one matrix product, Z S with z scaled per token (prefill decodes every cached
// token per chunk).
void TurboQuantProdCodec::decode_in_basis(const uint8_t* codes, size_t n, float* y) const {
  std::vector<float> z(std::min(n, kDecodeRun) * dim_);
  configure_blas();
  for (size_t t0 = 0; t0 < n; t0 += kDecodeRun) {
    const size_t rows = std::min(kDecodeRun, n - t0);
    for (size_t t = 0; t < rows; ++t) {
      const uint8_t* rec = codes + (t0 + t) * stride_;
      const float norm = read_f32(rec), k = qjl_factor_ * read_f32(rec + sizeof(float));
      float* row = y + (t0 + t) * dim_;
      if (mse_bits_) unpack_table_f32(rec + kHeader, dim_, mse_bits_, codebook_.centroids.data(), norm, row);
      else std::fill_n(row, dim_, norm * codebook_.value(0));
      // Sign bit 1 is +k, 0 is -k: the grid {-k, k}, exact (2k - k rounds to k).
      unpack_affine_f32(rec + kHeader + mse_bytes_, dim_, 1, -k, 2 * k, z.data() + t * dim_);
    }
    const auto d = static_cast<blasint>(dim_);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(rows), d, d, 1.0f, z.data(),
                d, sketch_.data(), d, 1.0f, y + t0 * dim_, d);
  }
}

void TurboQuantProdCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  decode_in_basis(codes, n, x);
  rotation_.inverse(x, n);
}

// q . x = ||x|| (R q) . y_mse + sqrt(pi/2)/dim * rho * (S R q) . z: per call the queries are
// rotated and sketched once, then one pass over each record's codes and sign bits sums both terms.
void TurboQuantProdCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                                float* scores) const {
  const size_t P = sign_kernel_.positions();
  std::vector<float> rotated(q, q + nq * dim_), sq(dim_), qk(nq * P), totals(nq);
  rotation_.forward(rotated.data(), nq);
  if (!mse_kernel_) {
    for (size_t i = 0; i < nq; ++i) {
      sketch(rotated.data() + i * dim_, sq.data());
      sign_kernel_.to_kernel_order(sq.data(), qk.data() + i * P);
    }
    sign_kernel_.dot(qk.data(), nq, codes, n, sign_format_, qjl_factor_, scores);
    return;
  }
  // The fused kernel wants 2 S q in natural order and the sum of S q (see SignTerm).
  const size_t M = mse_kernel_->positions();
  std::vector<float> mk(nq * M);
  for (size_t i = 0; i < nq; ++i) {
    float* twice = qk.data() + i * P;
    sketch(rotated.data() + i * dim_, twice);
    for (size_t c = 0; c < dim_; ++c) {
      totals[i] += twice[c];
      twice[c] *= 2;
    }
    mse_kernel_->to_kernel_order(rotated.data() + i * dim_, mk.data() + i * M);
  }
  const SignTerm signs{&sign_kernel_, qk.data(), totals.data(), sign_format_, qjl_factor_};
  mse_kernel_->dot(mk.data(), nq, codes, n, mse_format_, 1.0f, scores, &signs);
}

// sum_t w_t x_t = R^T (sum_t w_t ||x_t|| y_mse,t + S^T sum_t w_t sqrt(pi/2)/dim rho_t z_t).
void TurboQuantProdCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                                     float* out) const {
  const size_t P = sign_kernel_.positions();
  std::vector<float> zk(nq * P, 0.0f), z(dim_), sums(nq * dim_, 0.0f);
  sign_kernel_.accumulate(w, nq, codes, n, sign_format_, qjl_factor_, zk.data());
  if (mse_kernel_) {
    const size_t M = mse_kernel_->positions();
    std::vector<float> mk(nq * M, 0.0f);
    mse_kernel_->accumulate(w, nq, codes, n, mse_format_, 1.0f, mk.data());
    for (size_t i = 0; i < nq; ++i) mse_kernel_->add_natural_order(mk.data() + i * M, sums.data() + i * dim_);
  }
  for (size_t i = 0; i < nq; ++i) {
    std::fill(z.begin(), z.end(), 0.0f);
    sign_kernel_.add_natural_order(zk.data() + i * P, z.data());
    sketch_transpose(z.data(), sums.data() + i * dim_);
  }
  rotation_.inverse(sums.data(), nq);
  for (size_t i = 0; i < nq * dim_; ++i) out[i] += sums[i];
}

}  // namespace veloxquant::turboquant
