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
#include "core/simd.h"
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

// Codes of B = 2 or 4 bits (whole codes per byte, lowest bits first: pack_bits' stream) as floats.
template <unsigned B>
void codes_to_float(const uint8_t* packed, size_t total, float* out) {
  constexpr unsigned kPerByte = 8 / B, kMask = (1u << B) - 1u;
  size_t i = 0;
  for (; i + kPerByte <= total; i += kPerByte) {
    const unsigned byte = packed[i / kPerByte];
    for (unsigned k = 0; k < kPerByte; ++k) out[i + k] = static_cast<float>((byte >> (k * B)) & kMask);
  }
  for (unsigned k = 0; i < total; ++i, ++k)
    out[i] = static_cast<float>((packed[i / kPerByte] >> (k * B)) & kMask);
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
  Parts p;
  read_parts(in, p);
  // The base quantizer: the same expression as KIVI's decode, so rank 0 and sparsity 0 give
  // KIVI's keys (group = block) and values (group = head_dim) bit for bit.
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      const size_t g = axis_ == Axis::PerChannel ? c : t;
      x[t * d + c] = p.mins[g] + p.scale[g] * p.codes[t * d + c];
    }
  if (r_ > 0) add_low_rank(p.a.data(), p.b.data(), n, d, r_, x);
  for (size_t i = 0; i < k_; ++i) x[p.sparse_at[i]] += p.sparse_values[i];
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

void GearCodec::read_parts(const uint8_t* in, Parts& p) const {
  const size_t d = dim_, n = n_, total = n * d;
  p.codes.resize(total);
  if (bits_ == 2) codes_to_float<2>(in + codes_offset(), total, p.codes.data());
  else codes_to_float<4>(in + codes_offset(), total, p.codes.data());
  p.scale.resize(m_), p.mins.resize(m_);
  for (size_t g = 0; g < m_; ++g) {
    p.scale[g] = f16_to_f32(load_half(in + 2 * g));
    p.mins[g] = f16_to_f32(load_half(in + 2 * (m_ + g)));
  }
  p.a.resize(n * r_), p.b.resize(r_ * d);
  const uint8_t* f = in + factors_offset();
  for (size_t i = 0; i < p.a.size(); ++i) p.a[i] = f16_to_f32(load_half(f + 2 * i));
  for (size_t i = 0; i < p.b.size(); ++i) p.b[i] = f16_to_f32(load_half(f + 2 * (p.a.size() + i)));
  p.sparse_at.resize(k_), p.sparse_values.resize(k_);
  for (size_t i = 0; i < k_; ++i) {
    p.sparse_at[i] = load_index(in + index_offset() + i * ib_, ib_);
    p.sparse_values[i] = f16_to_f32(load_half(in + values_offset() + 2 * i));
  }
}

// x_t . q = sum_c q_c (min_g + scale_g code_tc) + sum_j A_tj (B q)_j + the block's sparse entries
// of token t, with g the channel (keys) or the token (values).
void GearCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const size_t d = dim_, nb = n_;
  const bool per_channel = axis_ == Axis::PerChannel;
  Parts p;
  std::vector<float> folded(nq * d), base(nq), bq(nq * r_), dots(nq * nb);
  for (size_t blk = 0; blk < n / nb; ++blk) {
    read_parts(codes + blk * block_bytes_, p);
    for (size_t i = 0; i < nq; ++i) {
      const float* qi = q + i * d;
      float sum = 0;
      for (size_t c = 0; c < d; ++c) {
        folded[i * d + c] = per_channel ? qi[c] * p.scale[c] : qi[c];
        sum += qi[c] * (per_channel ? p.mins[c] : 1.0f);
      }
      base[i] = sum;
      for (size_t j = 0; j < r_; ++j) bq[i * r_ + j] = simd::dot(p.b.data() + j * d, qi, d);
    }
    simd::dot_f32_rows(folded.data(), nq, p.codes.data(), nb, d, dots.data());
    for (size_t i = 0; i < nq; ++i) {
      float* out = scores + i * n + blk * nb;
      for (size_t t = 0; t < nb; ++t) {
        const float codes_part = dots[i * nb + t];
        float s = per_channel ? base[i] + codes_part : p.mins[t] * base[i] + p.scale[t] * codes_part;
        for (size_t j = 0; j < r_; ++j) s += p.a[t * r_ + j] * bq[i * r_ + j];
        out[t] = s;
      }
      for (size_t e = 0; e < k_; ++e)
        out[p.sparse_at[e] / d] += q[i * d + p.sparse_at[e] % d] * p.sparse_values[e];
    }
  }
}

// sum_t w_t x_t: the codes' weighted sum scaled per channel (keys) or weighted by the token's
// scale (values), the minimums' share, (sum_t w_t A_t) B, and each sparse entry times its weight.
void GearCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const {
  const size_t d = dim_, nb = n_;
  const bool per_channel = axis_ == Axis::PerChannel;
  Parts p;
  std::vector<float> weights(nq * nb), sums(nq * d), wa(r_);
  for (size_t blk = 0; blk < n / nb; ++blk) {
    read_parts(codes + blk * block_bytes_, p);
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < nb; ++t)
        weights[i * nb + t] = w[i * n + blk * nb + t] * (per_channel ? 1.0f : p.scale[t]);
    std::fill(sums.begin(), sums.end(), 0.0f);
    simd::accumulate_f32_rows(weights.data(), nq, p.codes.data(), nb, d, sums.data());
    for (size_t i = 0; i < nq; ++i) {
      const float* wi = w + i * n + blk * nb;
      float* oi = out + i * d;
      float total = 0;  // sum_t w_t, or (values) sum_t w_t min_t
      for (size_t t = 0; t < nb; ++t) total += wi[t] * (per_channel ? 1.0f : p.mins[t]);
      for (size_t c = 0; c < d; ++c) {
        const float* si = sums.data() + i * d;
        oi[c] += per_channel ? p.mins[c] * total + p.scale[c] * si[c] : total + si[c];
      }
      std::fill(wa.begin(), wa.end(), 0.0f);
      for (size_t t = 0; t < nb; ++t)
        for (size_t j = 0; j < r_; ++j) wa[j] += wi[t] * p.a[t * r_ + j];
      for (size_t j = 0; j < r_; ++j) simd::axpy(wa[j], p.b.data() + j * d, oi, d);
      for (size_t e = 0; e < k_; ++e) oi[p.sparse_at[e] % d] += wi[p.sparse_at[e] / d] * p.sparse_values[e];
    }
  }
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
