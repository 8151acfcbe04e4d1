#include "codecs/qjl/qjl_key_codec.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <string>

#include "codecs/qjl/sign_sums.h"
#include "core/bitpack.h"
#include "core/blas.h"
#include "core/rng.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

// E[<s, q> sign(<s, k>)] = sqrt(2/pi) <q, k> / ||k|| for s ~ N(0, I): this undoes that factor.
const float kSqrtHalfPi = static_cast<float>(std::sqrt(std::numbers::pi / 2));

// Tokens decoded per matrix product.
constexpr size_t kDecodeRun = 256;

void pack_signs(const float* v, size_t m, uint8_t* bits) {
  for (size_t b = 0; b < m / 8; ++b) {
    uint8_t byte = 0;
    for (size_t i = 0; i < 8; ++i) byte |= static_cast<uint8_t>(v[b * 8 + i] > 0) << i;
    bits[b] = byte;
  }
}

// Norms are stored as root-mean-square over the part's channels: every element of a cached key is
// within the fp16 range, so its RMS is too, while its norm (up to sqrt(d) times larger) may not be.
uint16_t rms_to_f16(double sum_sq, size_t channels) {
  return f32_to_f16(static_cast<float>(std::sqrt(sum_sq / static_cast<double>(channels))));
}

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void store_u16(uint16_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

}  // namespace

QjlKeyCodec::QjlKeyCodec(const QjlKeyConfig& config) : cfg_(config) {
  require(cfg_.dim >= 1, "qjl", "head_dim 0; expected at least 1");
  require(cfg_.proj % 8 == 0 && cfg_.proj >= 8, "qjl",
          "proj=" + std::to_string(cfg_.proj) + "; expected a multiple of 8 (whole bytes of signs)");
  split_ = cfg_.outliers > 0;
  if (split_) {
    require(cfg_.outliers < cfg_.dim, "qjl", "outliers=" + std::to_string(cfg_.outliers) +
                                          "; expected fewer than head_dim " + std::to_string(cfg_.dim));
    require(cfg_.outlier_proj % 8 == 0 && cfg_.outlier_proj >= 8 && cfg_.outlier_proj <= cfg_.proj, "qjl",
            "outlier_proj=" + std::to_string(cfg_.outlier_proj) +
                "; expected a multiple of 8 in 8..proj (" + std::to_string(cfg_.proj) + ")");
    require(cfg_.group >= 1, "qjl", "group=0; expected at least 1 token");
    block_ = cfg_.group;
    index_bytes_ = cfg_.dim > 256 ? 2 : 1;
  }
  norm_in_ = std::sqrt(static_cast<float>(cfg_.dim - (split_ ? cfg_.outliers : 0)));
  norm_out_ = std::sqrt(static_cast<float>(split_ ? cfg_.outliers : 0));
  // Stored transposed for per-channel access.
  const size_t m = cfg_.proj, d = cfg_.dim;
  const std::vector<float> s = sketch_matrix(d, m, cfg_.seed);
  proj_t_.resize(d * m);
  for (size_t i = 0; i < m; ++i)
    for (size_t c = 0; c < d; ++c) proj_t_[c * m + i] = s[i * d + c];
  col_total_.resize(d);
  col_total_out_.resize(d);
  for (size_t c = 0; c < d; ++c) {
    const float* col = proj_t_.data() + c * m;
    col_total_[c] = std::accumulate(col, col + m, 0.0f);
    col_total_out_[c] = split_ ? std::accumulate(col, col + cfg_.outlier_proj, 0.0f) : 0.0f;
  }
}

std::vector<float> QjlKeyCodec::sketch_matrix(size_t dim, size_t proj, uint64_t seed) {
  return gaussian_matrix(proj, dim, seed);
}

size_t QjlKeyCodec::token_bytes() const {
  return cfg_.proj / 8 + 2 + (split_ ? cfg_.outlier_proj / 8 + 2 : 0);
}

size_t QjlKeyCodec::code_bytes(size_t n) const { return n / block_ * block_bytes(); }

size_t QjlKeyCodec::outlier_channel(const uint8_t* block, size_t j) const {
  return index_bytes_ == 1 ? block[j] : load_u16(block + 2 * j);
}

void QjlKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t b = 0; b < n / block_; ++b) {
    const uint8_t* block = codes + b * block_bytes();
    for (size_t j = 0; j < cfg_.outliers; ++j) {
      const size_t c = outlier_channel(block, j);
      if (c >= cfg_.dim || (j > 0 && c <= outlier_channel(block, j - 1))) {
        throw Error("qjl: corrupt key codes: block " + std::to_string(b) + ", outlier channel " +
                    std::to_string(c) + " at header slot " + std::to_string(j) +
                    "; expected increasing channels below head_dim " + std::to_string(cfg_.dim));
      }
    }
  }
}

std::vector<uint32_t> QjlKeyCodec::read_outliers(const uint8_t* block) const {
  std::vector<uint32_t> idx(cfg_.outliers);
  for (size_t j = 0; j < cfg_.outliers; ++j) idx[j] = static_cast<uint32_t>(outlier_channel(block, j));
  return idx;
}

void QjlKeyCodec::encode_block(const float* x, uint8_t* block) const {
  const size_t d = cfg_.dim, m = cfg_.proj, mo = cfg_.outlier_proj;
  std::vector<uint8_t> inlier(d, 1);
  if (split_) {
    // The channels with the largest energy over the group; ties go to the lower index so the
    // choice is deterministic.
    std::vector<double> energy(d, 0.0);
    for (size_t t = 0; t < block_; ++t)
      for (size_t c = 0; c < d; ++c) energy[c] += double(x[t * d + c]) * x[t * d + c];
    std::vector<uint32_t> order(d);
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(cfg_.outliers),
                      order.end(), [&](uint32_t a, uint32_t b) {
                        return energy[a] != energy[b] ? energy[a] > energy[b] : a < b;
                      });
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(cfg_.outliers));
    for (size_t j = 0; j < cfg_.outliers; ++j) {
      inlier[order[j]] = 0;
      if (index_bytes_ == 1) block[j] = static_cast<uint8_t>(order[j]);
      else store_u16(static_cast<uint16_t>(order[j]), block + 2 * j);
    }
  }
  // The inlier sketches of the whole block in one pass over S: the block's keys with their outlier
  // channels zeroed, times S^T. Each entry sums its channels in order, the same multiply-adds as
  // one axpy per channel and token, so the signs are the ones the GPU append computes; a zeroed
  // channel adds +-0, which leaves every sum as it was.
  std::vector<float> inliers(x, x + block_ * d), sk_in(block_ * m, 0.0f), sk_out(split_ ? mo : 0);
  for (size_t t = 0; t < block_; ++t)
    for (size_t c = 0; c < d; ++c)
      if (!inlier[c]) inliers[t * d + c] = 0.0f;
  simd::accumulate_f32_rows(inliers.data(), block_, proj_t_.data(), d, m, sk_in.data());
  uint8_t* rec = block + header_bytes();
  for (size_t t = 0; t < block_; ++t, rec += token_bytes()) {
    const float* k = x + t * d;
    std::fill(sk_out.begin(), sk_out.end(), 0.0f);
    double n_in = 0, n_out = 0;
    for (size_t c = 0; c < d; ++c) {
      if (inlier[c]) {
        n_in += double(k[c]) * k[c];
      } else {
        simd::axpy(k[c], proj_t_.data() + c * m, sk_out.data(), mo);
        n_out += double(k[c]) * k[c];
      }
    }
    pack_signs(sk_in.data() + t * m, m, rec);
    uint8_t* p = rec + m / 8;
    if (split_) {
      pack_signs(sk_out.data(), mo, p);
      p += mo / 8;
    }
    store_u16(rms_to_f16(n_in, d - (split_ ? cfg_.outliers : 0)), p);
    if (split_) store_u16(rms_to_f16(n_out, cfg_.outliers), p + 2);
  }
}

void QjlKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  for (size_t b = 0; b < n / block_; ++b)
    encode_block(x + b * block_ * cfg_.dim, codes + b * block_bytes());
}

// Decoding is a matrix product: the inlier sign bits of a run of tokens, as 0/1 floats, times S
// give sum_{i set} S[i, c] for every channel at once (prefill decodes every cached key per chunk).
// A block's few outlier channels take their own sketch's sums as dot products.
void QjlKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = cfg_.dim, m = cfg_.proj, mo = cfg_.outlier_proj;
  const size_t run = block_ * std::max<size_t>(1, kDecodeRun / block_);
  std::vector<float> bits(std::min(n, run) * m), sums(std::min(n, run) * d), out_bits(split_ ? mo : 0);
  configure_blas();
  for (size_t t0 = 0; t0 < n; t0 += run) {
    const size_t rows = std::min(run, n - t0);
    const uint8_t* first = codes + t0 / block_ * block_bytes();
    for (size_t t = 0; t < rows; ++t) {
      const uint8_t* rec = first + t / block_ * block_bytes() + header_bytes() + t % block_ * token_bytes();
      unpack_bits_f32(rec, m, 1, bits.data() + t * m);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), static_cast<blasint>(d),
                static_cast<blasint>(m), 1.0f, bits.data(), static_cast<blasint>(m), proj_t_.data(),
                static_cast<blasint>(m), 0.0f, sums.data(), static_cast<blasint>(d));
    for (size_t b = 0; b < rows / block_; ++b) {
      const uint8_t* block = first + b * block_bytes();
      const std::vector<uint32_t> outliers = read_outliers(block);
      const uint8_t* rec = block + header_bytes();
      for (size_t j = 0; j < block_; ++j, rec += token_bytes()) {
        const size_t t = b * block_ + j;
        const uint8_t* norms = rec + m / 8 + (split_ ? mo / 8 : 0);
        const float scale = norm_in_ * kSqrtHalfPi / float(m) * f16_to_f32(load_u16(norms));
        float* row = x + (t0 + t) * d;
        for (size_t c = 0; c < d; ++c) row[c] = scale * (2 * sums[t * d + c] - col_total_[c]);
        if (!split_) continue;
        const float scale_out = norm_out_ * kSqrtHalfPi / float(mo) * f16_to_f32(load_u16(norms + 2));
        unpack_bits_f32(rec + m / 8, mo, 1, out_bits.data());
        for (const uint32_t c : outliers)
          row[c] = scale_out *
                   (2 * simd::dot(out_bits.data(), proj_t_.data() + c * m, mo) - col_total_out_[c]);
      }
    }
  }
}

// Per call: S q for every query and its total. Per block the outlier channels O change, so
// v = S q_O (the outlier part of q) is rebuilt from |O| columns of S and u = S q - v; the totals
// follow from the column sums of S without another pass. Then one pass of weighted masked sums
// over the block's bits scores four queries at a time.
void QjlKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                        float* scores) const {
  const size_t d = cfg_.dim, m = cfg_.proj, mo = cfg_.outlier_proj;
  std::vector<float> sq(nq * m, 0.0f), sq_total(nq, 0.0f);
  for (size_t i = 0; i < nq; ++i)
    for (size_t c = 0; c < d; ++c) {
      simd::axpy(q[i * d + c], proj_t_.data() + c * m, sq.data() + i * m, m);
      sq_total[i] += q[i * d + c] * col_total_[c];
    }
  std::vector<float> u(split_ ? nq * m : 0), v(split_ ? nq * m : 0), u_total(nq), v_total(nq, 0.0f);
  // Tokens per run of masked sums: a block with outliers (u changes per block), else up to 256.
  const size_t run = split_ ? block_ : std::min<size_t>(n, 256);
  std::vector<float> sums(run * 4), w_in(run), w_out(run, 0.0f);  // without outliers w_out stays 0
  const size_t no = cfg_.outliers;
  std::vector<const float*> col(no);  // the block's outlier columns of S
  std::vector<float> qo(nq * no);     // the queries at the block's outlier channels
  const float scale_in = norm_in_ * kSqrtHalfPi / float(m);
  const float scale_out = split_ ? norm_out_ * kSqrtHalfPi / float(mo) : 0;
  const uint8_t* block = codes;
  for (size_t t0 = 0; t0 < n; t0 += run, block += run / block_ * block_bytes()) {
    const size_t rows = std::min(run, n - t0);
    const float* ui = sq.data();
    if (split_) {
      for (size_t j = 0; j < no; ++j) col[j] = proj_t_.data() + outlier_channel(block, j) * m;
      for (size_t i = 0; i < nq; ++i) {
        u_total[i] = sq_total[i];
        v_total[i] = 0;
        for (size_t j = 0; j < no; ++j) {
          const size_t c = outlier_channel(block, j);
          const float qc = qo[i * no + j] = q[i * d + c];
          u_total[i] -= qc * col_total_[c];
          v_total[i] += qc * col_total_out_[c];
        }
      }
      qjl::outlier_sketch(col.data(), qo.data(), no, nq, sq.data(), m, v.data(), u.data());
      ui = u.data();
    } else {
      std::copy(sq_total.begin(), sq_total.end(), u_total.begin());
    }
    const uint8_t* rec = block + header_bytes();
    const uint8_t* norms = rec + m / 8 + (split_ ? mo / 8 : 0);
    // Weights carry the 2 of 2 * masked_sum - total.
    for (size_t t = 0; t < rows; ++t) {
      w_in[t] = 2 * scale_in * f16_to_f32(load_u16(norms + t * token_bytes()));
      if (split_) w_out[t] = 2 * scale_out * f16_to_f32(load_u16(norms + t * token_bytes() + 2));
    }
    const qjl::SignRows sign_rows{rec, token_bytes(), rows, m, split_ ? mo : 0, w_in.data(), w_out.data()};
    for (size_t i0 = 0; i0 < nq; i0 += 4) {
      const size_t nu = std::min<size_t>(4, nq - i0);
      qjl::weighted_masked_sums(sign_rows, ui + i0 * m, split_ ? v.data() + i0 * m : nullptr, nu, m,
                                sums.data());
      for (size_t j = 0; j < nu; ++j) {
        const float* a = sums.data() + j * rows;
        const float ut = u_total[i0 + j] / 2, vt = v_total[i0 + j] / 2;
        float* dst = scores + (i0 + j) * n + t0;
        for (size_t t = 0; t < rows; ++t) dst[t] = a[t] - w_in[t] * ut - w_out[t] * vt;
      }
    }
  }
}

}  // namespace veloxquant
