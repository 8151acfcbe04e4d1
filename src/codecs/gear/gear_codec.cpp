#include "codecs/gear/gear_codec.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "core/rng.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::gear {
namespace {

// Subspace (block power) iterations for the low-rank part; GEAR's reference code also runs a
// few power iterations rather than a full SVD.
constexpr int kPowerIterations = 4;
constexpr size_t kOversample = 4;
constexpr uint64_t kStartSeed = 0x6ea2'2403'0552ull;  // the start block is the same everywhere

// fp16 of a finite float, saturated to the largest finite half (encode never stores infinity).
uint16_t half_clamped(double x) {
  return f32_to_f16(static_cast<float>(std::clamp(x, -65504.0, 65504.0)));
}
bool half_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

uint32_t load_index(const uint8_t* p, size_t ib) {
  if (ib == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void store_index(uint8_t* p, size_t ib, uint32_t v) {
  if (ib == 2) {
    const auto s = static_cast<uint16_t>(v);
    std::memcpy(p, &s, 2);
  } else {
    std::memcpy(p, &v, 4);
  }
}

// x[t][c] += sum_j a[t][j] b[j][c]. One out-of-line function for encode and decode, so the sparse
// corrections encode() computes against (Q + L) see exactly the (Q + L) decode() rebuilds.
[[gnu::noinline]] void add_low_rank(const float* a, const float* b, size_t n, size_t d, size_t r,
                                    float* x) {
  for (size_t t = 0; t < n; ++t)
    for (size_t j = 0; j < r; ++j) {
      const float at = a[t * r + j];
      const float* bj = b + j * d;
      float* xt = x + t * d;
      for (size_t c = 0; c < d; ++c) xt[c] += at * bj[c];
    }
}

Eigen::MatrixXd orthonormal_columns(const Eigen::MatrixXd& y) {
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(y);
  return qr.householderQ() * Eigen::MatrixXd::Identity(y.rows(), y.cols());
}

// Rank-r factors of res ([n][d] row-major): a = U sqrt(S) ([n][r]), b = sqrt(S) V^T ([r][d]),
// from a few subspace iterations with oversampling and a Rayleigh-Ritz step.
void low_rank_factors(const std::vector<double>& res, size_t n, size_t d, size_t r,
                      std::vector<double>& a, std::vector<double>& b) {
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor> m(res.data(), static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(d));
  const auto p = static_cast<Eigen::Index>(std::min(r + kOversample, std::min(n, d)));
  Eigen::MatrixXd omega(static_cast<Eigen::Index>(d), p);
  Rng rng(kStartSeed);
  for (Eigen::Index j = 0; j < p; ++j)
    for (Eigen::Index i = 0; i < omega.rows(); ++i) omega(i, j) = rng.normal();
  Eigen::MatrixXd q = orthonormal_columns(m * omega);
  for (int it = 0; it < kPowerIterations; ++it) {
    const Eigen::MatrixXd z = orthonormal_columns(m.transpose() * q);
    q = orthonormal_columns(m * z);
  }
  const Eigen::MatrixXd small = q.transpose() * m;  // [p][d]
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(small, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::MatrixXd u = q * svd.matrixU();  // [n][p]
  const Eigen::MatrixXd& v = svd.matrixV();     // [d][p]
  a.assign(n * r, 0.0);
  b.assign(r * d, 0.0);
  for (size_t j = 0; j < r && static_cast<Eigen::Index>(j) < p; ++j) {
    const double s = std::sqrt(std::max(0.0, svd.singularValues()(static_cast<Eigen::Index>(j))));
    for (size_t t = 0; t < n; ++t) a[t * r + j] = u(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(j)) * s;
    for (size_t c = 0; c < d; ++c) b[j * d + c] = v(static_cast<Eigen::Index>(c), static_cast<Eigen::Index>(j)) * s;
  }
}

}  // namespace

size_t sparse_entries(double sparsity, size_t total) {
  return std::min(total, static_cast<size_t>(std::floor(sparsity * static_cast<double>(total) + 0.5)));
}

GearCodec::GearCodec(size_t dim, Axis axis, const GearConfig& cfg)
    : dim_(dim), n_(cfg.block), m_(axis == Axis::PerChannel ? dim : cfg.block),
      r_(std::min({cfg.rank, cfg.block, dim})), k_(sparse_entries(cfg.sparsity, cfg.block * dim)),
      ib_(cfg.block * dim <= 65536 ? 2 : 4), code_bits_bytes_(packed_bytes(cfg.block * dim, cfg.bits)),
      block_bytes_(4 * m_ + code_bits_bytes_ + 2 * r_ * (n_ + dim_) + k_ * (ib_ + 2)),
      bits_(cfg.bits), axis_(axis) {}

void GearCodec::decode_block(const uint8_t* in, float* x) const {
  const size_t d = dim_, n = n_;
  std::vector<uint8_t> q(n * d);
  unpack_bits(in + codes_offset(), n * d, bits_, q.data());
  std::vector<float> scale(m_), mins(m_);
  for (size_t g = 0; g < m_; ++g) {
    scale[g] = f16_to_f32(load_half(in + 2 * g));
    mins[g] = f16_to_f32(load_half(in + 2 * (m_ + g)));
  }
  // The base quantizer: the same expression as KIVI's decode, so rank 0 and sparsity 0 give
  // KIVI's keys (group = block) and values (group = head_dim) bit for bit.
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      const size_t g = axis_ == Axis::PerChannel ? c : t;
      x[t * d + c] = mins[g] + scale[g] * static_cast<float>(q[t * d + c]);
    }
  if (r_ > 0) {
    std::vector<float> a(n * r_), b(r_ * d);
    const uint8_t* f = in + factors_offset();
    for (size_t i = 0; i < a.size(); ++i) a[i] = f16_to_f32(load_half(f + 2 * i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = f16_to_f32(load_half(f + 2 * (a.size() + i)));
    add_low_rank(a.data(), b.data(), n, d, r_, x);
  }
  for (size_t i = 0; i < k_; ++i) {
    const uint32_t pos = load_index(in + index_offset() + i * ib_, ib_);
    x[pos] += f16_to_f32(load_half(in + values_offset() + 2 * i));
  }
}

void GearCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = dim_, nb = n_, total = nb * d;
  std::vector<uint8_t> q(total);
  std::vector<AffineGrid> grids(m_);
  std::vector<float> rebuilt(total);
  std::vector<double> res(total), fa, fb;
  std::vector<uint32_t> order(total);
  for (size_t blk = 0; blk < n / nb; ++blk) {
    const float* xb = x + blk * total;
    uint8_t* out = codes + blk * block_bytes_;
    // 1. Base quantization: asymmetric min/max, keys per channel, values per token.
    for (size_t g = 0; g < m_; ++g) {
      float lo, hi;
      if (axis_ == Axis::PerChannel) {
        lo = hi = xb[g];
        for (size_t t = 1; t < nb; ++t) lo = std::min(lo, xb[t * d + g]), hi = std::max(hi, xb[t * d + g]);
      } else {
        const auto [l, h] = std::minmax_element(xb + g * d, xb + (g + 1) * d);
        lo = *l, hi = *h;
      }
      grids[g] = AffineGrid::fit(lo, hi, bits_);
      store_half(out + 2 * g, grids[g].scale_f16);
      store_half(out + 2 * (m_ + g), grids[g].min_f16);
    }
    for (size_t t = 0; t < nb; ++t)
      for (size_t c = 0; c < d; ++c)
        q[t * d + c] = grids[axis_ == Axis::PerChannel ? c : t].quantize(xb[t * d + c]);
    pack_bits(q.data(), total, bits_, out + codes_offset());
    if (r_ == 0 && k_ == 0) continue;
    // The base reconstruction, the same expression decode() evaluates.
    for (size_t t = 0; t < nb; ++t)
      for (size_t c = 0; c < d; ++c) {
        const AffineGrid& g = grids[axis_ == Axis::PerChannel ? c : t];
        rebuilt[t * d + c] = g.min + g.scale * static_cast<float>(q[t * d + c]);
      }
    // 2. Residual R = X - Q(X); the k largest |R| entries become the sparse part.
    for (size_t i = 0; i < total; ++i) res[i] = static_cast<double>(xb[i]) - static_cast<double>(rebuilt[i]);
    if (k_ > 0) {
      std::iota(order.begin(), order.end(), 0u);
      const auto larger = [&](uint32_t i, uint32_t j) {
        const double ai = std::fabs(res[i]), aj = std::fabs(res[j]);
        return ai != aj ? ai > aj : i < j;
      };
      if (k_ < total) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_), order.end(), larger);
      std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k_));
      for (size_t i = 0; i < k_; ++i) res[order[i]] = 0.0;
    }
    // 3. Low-rank part of what is left, factors in fp16.
    if (r_ > 0) {
      low_rank_factors(res, nb, d, r_, fa, fb);
      std::vector<float> a(nb * r_), b(r_ * d);
      uint8_t* f = out + factors_offset();
      for (size_t i = 0; i < a.size(); ++i) {
        const uint16_t h = half_clamped(fa[i]);
        store_half(f + 2 * i, h);
        a[i] = f16_to_f32(h);
      }
      for (size_t i = 0; i < b.size(); ++i) {
        const uint16_t h = half_clamped(fb[i]);
        store_half(f + 2 * (a.size() + i), h);
        b[i] = f16_to_f32(h);
      }
      add_low_rank(a.data(), b.data(), nb, d, r_, rebuilt.data());
    }
    // 4. Sparse corrections against Q + L as decode() rebuilds it: those entries come back exact
    //    up to one fp16 rounding of the correction.
    for (size_t i = 0; i < k_; ++i) {
      const uint32_t pos = order[i];
      store_index(out + index_offset() + i * ib_, ib_, pos);
      store_half(out + values_offset() + 2 * i,
                 half_clamped(static_cast<double>(xb[pos]) - static_cast<double>(rebuilt[pos])));
    }
  }
}

void GearCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  for (size_t blk = 0; blk < n / n_; ++blk) decode_block(codes + blk * block_bytes_, x + blk * n_ * dim_);
}

void GearCodec::check_codes(const uint8_t* codes, size_t n) const {
  const std::string stream = axis_ == Axis::PerChannel ? "key" : "value";
  const size_t total = n_ * dim_;
  for (size_t blk = 0; blk < n / n_; ++blk) {
    const uint8_t* in = codes + blk * block_bytes_;
    const std::string at = "gear: corrupt " + stream + " codes: block " + std::to_string(blk) + ", ";
    for (size_t g = 0; g < m_; ++g) {
      const uint16_t s = load_half(in + 2 * g), mn = load_half(in + 2 * (m_ + g));
      // A group of negative zeros stores the step -0 (0x8000), as good as 0.
      const bool step_ok = half_finite(s) && ((s & 0x8000) == 0 || s == 0x8000);
      if (!step_ok || !half_finite(mn)) {
        throw Error(at + "grid " + std::to_string(g) + " stores step " + std::to_string(f16_to_f32(s)) +
                    " and minimum " + std::to_string(f16_to_f32(mn)) +
                    "; expected a finite step >= 0 and a finite minimum");
      }
    }
    const size_t factors = r_ * (n_ + dim_);
    for (size_t i = 0; i < factors; ++i) {
      if (!half_finite(load_half(in + factors_offset() + 2 * i))) {
        throw Error(at + "low-rank factor " + (i < n_ * r_ ? "A" : "B") + " element " +
                    std::to_string(i < n_ * r_ ? i : i - n_ * r_) + " is not finite");
      }
    }
    uint64_t prev = 0;
    for (size_t i = 0; i < k_; ++i) {
      const uint32_t pos = load_index(in + index_offset() + i * ib_, ib_);
      if (pos >= total || (i > 0 && pos <= prev)) {
        throw Error(at + "sparse index " + std::to_string(i) + " is " + std::to_string(pos) +
                    "; expected strictly increasing positions below " + std::to_string(total) +
                    " (block tokens x head_dim)");
      }
      prev = pos;
      const uint16_t v = load_half(in + values_offset() + 2 * i);
      if (!half_finite(v)) {
        throw Error(at + "sparse value " + std::to_string(i) + " is not finite");
      }
    }
  }
}

}  // namespace veloxquant::gear
