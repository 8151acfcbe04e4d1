#include "codecs/palu/palu_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "codecs/common/affine_grid.h"
#include "codecs/palu/palu_basis.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "core/principal_basis.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::palu {
namespace {

// Tokens dequantized at a time by score() and accumulate().
constexpr size_t kChunk = 256;
// A stored basis's columns are orthonormal up to fp16 rounding, which moves a dot product of two
// unit columns by at most about 2^-10; twice that is accepted. The bound also keeps every latent
// of an fp16-range vector below 1.13 * sqrt(dim) * 65504, inside the grids' fp16 range.
constexpr double kOrthonormalTolerance = 2e-3;

bool half_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

}  // namespace

PaluCodec::PaluCodec(PaluConfig cfg) : cfg_(std::move(cfg)), unit_(latent_scale(cfg_.dim)) {
  size_t grids = 0, code_bytes = 0;
  const auto add = [&](size_t first, size_t count, unsigned bits, const char* name) {
    if (count == 0) return;
    parts_.push_back(Part{first, count, bits, 4 * grids++, code_bytes, name});
    code_bytes += packed_bytes(count, bits);
  };
  add(0, cfg_.hi, cfg_.hi_bits, "hi-bit");
  add(cfg_.hi, cfg_.rank - cfg_.hi, cfg_.lo_bits, "lo-bit");
  for (Part& p : parts_) p.code_offset += 4 * grids;
  token_bytes_ = 4 * grids + code_bytes;
}

PaluCodec::PaluCodec(PaluConfig cfg, std::vector<float> basis) : PaluCodec(std::move(cfg)) {
  basis_ = std::move(basis);
  basis_t_.resize(basis_.size());
  for (size_t c = 0; c < cfg_.dim; ++c)
    for (size_t j = 0; j < cfg_.rank; ++j) basis_t_[j * cfg_.dim + c] = basis_[c * cfg_.rank + j];
  std::vector<float> scaled(basis_t_);
  for (float& v : scaled) v *= unit_;
  frame_ = LatentFrame(scaled.data(), cfg_.dim, cfg_.rank);
}

std::vector<std::vector<uint8_t>> PaluCodec::fit_streams(const float* x, size_t n, size_t heads) const {
  const size_t group = std::max<size_t>(1, std::min(cfg_.group, heads));
  std::vector<std::vector<uint8_t>> states(heads);
  for (size_t first = 0; first < heads; first += group) {
    const size_t count = std::min(group, heads - first);
    const std::vector<float> b = fit_basis(x, n, heads, first, count, cfg_.dim, cfg_.rank, cfg_.hi, cfg_.hadamard);
    std::vector<uint8_t>& s = states[first];
    s.resize(stream_state_bytes());
    for (size_t i = 0; i < b.size(); ++i) store_half(s.data() + 2 * i, f32_to_f16(b[i]));
  }
  return states;
}

std::vector<float> PaluCodec::basis_from_state(const std::vector<uint8_t>& state, size_t leader) const {
  const size_t d = cfg_.dim, r = cfg_.rank;
  std::vector<float> b(d * r);
  for (size_t i = 0; i < b.size(); ++i) {
    b[i] = f16_to_f32(load_half(state.data() + 2 * i));
    if (!(std::fabs(b[i]) <= 1.0f)) {
      throw Error(fmt::format("palu: corrupt {} state of KV head {}: basis entry (channel {}, latent {}) is "
                              "{}; expected a finite value within [-1, 1]",
                              cfg_.stream, leader, i / r, i % r, b[i]));
    }
  }
  for (size_t j = 0; j < r; ++j)
    for (size_t k = j; k < r; ++k) {
      double dot = 0;
      for (size_t c = 0; c < d; ++c) dot += static_cast<double>(b[c * r + j]) * b[c * r + k];
      if (std::fabs(dot - (j == k ? 1.0 : 0.0)) > kOrthonormalTolerance) {
        throw Error(fmt::format("palu: corrupt {} state of KV head {}: basis columns {} and {} have dot "
                                "product {}; expected orthonormal columns (within {})",
                                cfg_.stream, leader, j, k, dot, kOrthonormalTolerance));
      }
    }
  return b;
}

std::unique_ptr<Codec> PaluCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                              size_t head) const {
  if (head >= states.size()) {
    throw Error(fmt::format("palu: {} states for KV head {}; expected one state per KV head of the layer",
                            states.size(), head));
  }
  const size_t group = std::min(cfg_.group, states.size());
  for (size_t h = 0; h < states.size(); ++h) {
    const size_t leader = group_first(h, group);
    const size_t expected = h == leader ? stream_state_bytes() : 0;
    if (states[h].size() != expected) {
      throw Error(fmt::format("palu: corrupt {} state of KV head {}: {} bytes; expected {} ({})", cfg_.stream,
                              h, states[h].size(), expected,
                              h == leader ? fmt::format("the fp16 basis of its group, {} x {}", cfg_.dim, cfg_.rank)
                                          : fmt::format("it shares the basis of KV head {}", leader)));
    }
  }
  const size_t leader = group_first(head, group);
  return std::unique_ptr<Codec>(new PaluCodec(cfg_, basis_from_state(states[leader], leader)));
}

void PaluCodec::require_basis(const char* what, size_t n) const {
  if (basis_.empty() && n > 0) {
    throw Error(fmt::format("palu: {} on the {} prototype codec, which has no basis; expected the codec "
                            "with_states() returns after fit_streams()",
                            what, cfg_.stream));
  }
}

void PaluCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  require_basis("encode", n);
  const size_t d = cfg_.dim, r = cfg_.rank;
  const float inv_unit = 1.0f / unit_;
  std::vector<float> y(r);
  std::vector<uint8_t> q(r);
  for (size_t t = 0; t < n; ++t) {
    simd::dot_f32_rows(x + t * d, 1, basis_t_.data(), r, d, y.data());
    for (float& v : y) v *= inv_unit;
    uint8_t* rec = codes + t * token_bytes_;
    for (const Part& p : parts_) {
      const auto [lo, hi] = std::minmax_element(y.begin() + static_cast<std::ptrdiff_t>(p.first),
                                                y.begin() + static_cast<std::ptrdiff_t>(p.first + p.count));
      const AffineGrid g = AffineGrid::fit(*lo, *hi, p.bits);
      store_half(rec + p.grid_offset, g.min_f16);
      store_half(rec + p.grid_offset + 2, g.scale_f16);
      for (size_t j = 0; j < p.count; ++j) q[j] = g.quantize(y[p.first + j]);
      pack_bits(q.data(), p.count, p.bits, rec + p.code_offset);
    }
  }
}

void PaluCodec::latents(const uint8_t* codes, size_t n, float* y, size_t stride) const {
  const size_t r = cfg_.rank;
  if (stride == 0) stride = r;
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * token_bytes_;
    for (const Part& p : parts_) {
      const float mn = f16_to_f32(load_half(rec + p.grid_offset));
      const float step = f16_to_f32(load_half(rec + p.grid_offset + 2));
      unpack_affine_f32(rec + p.code_offset, p.count, p.bits, mn, step, y + t * stride + p.first);
    }
  }
}

void PaluCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  require_basis("decode", n);
  const size_t d = cfg_.dim, r = cfg_.rank;
  std::vector<float> y(std::min(n, kChunk) * r);
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    latents(codes + t0 * token_bytes_, m, y.data());
    // x_t[c] = unit * (row c of B) . y_t
    simd::dot_f32_rows(y.data(), m, basis_.data(), d, r, x + t0 * d);
    for (size_t i = 0; i < m * d; ++i) x[t0 * d + i] *= unit_;
  }
}

void PaluCodec::decode_in_basis(const uint8_t* codes, size_t n, float* y) const {
  require_basis("decode", n);
  latents(codes, n, y, cfg_.dim);
}

void PaluCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  require_basis("score", n);
  const size_t d = cfg_.dim, r = cfg_.rank;
  // q . (unit B y) = (unit B^T q) . y: each query projected once.
  std::vector<float> u(nq * r);
  simd::dot_f32_rows(q, nq, basis_t_.data(), r, d, u.data());
  for (float& v : u) v *= unit_;
  std::vector<float> y(std::min(n, kChunk) * r), s(nq * std::min(n, kChunk));
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    latents(codes + t0 * token_bytes_, m, y.data());
    simd::dot_f32_rows(u.data(), nq, y.data(), m, r, s.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(s.data() + i * m, m, scores + i * n + t0);
  }
}

void PaluCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const {
  require_basis("accumulate", n);
  const size_t d = cfg_.dim, r = cfg_.rank;
  // sum_t w_t (unit B y_t) = unit B (sum_t w_t y_t): summed in latent space, projected back once.
  std::vector<float> acc(nq * r, 0.0f), y(std::min(n, kChunk) * r), wc(nq * std::min(n, kChunk));
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    latents(codes + t0 * token_bytes_, m, y.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(w + i * n + t0, m, wc.data() + i * m);
    simd::accumulate_f32_rows(wc.data(), nq, y.data(), m, r, acc.data());
  }
  std::vector<float> back(nq * d);
  simd::dot_f32_rows(acc.data(), nq, basis_.data(), d, r, back.data());
  for (size_t i = 0; i < nq * d; ++i) out[i] += unit_ * back[i];
}

void PaluCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * token_bytes_;
    for (const Part& p : parts_) {
      const uint16_t mn = load_half(rec + p.grid_offset), step = load_half(rec + p.grid_offset + 2);
      // A part of negative zeros stores the step -0 (0x8000), as good as 0.
      const bool step_ok = half_finite(step) && ((step & 0x8000) == 0 || step == 0x8000);
      if (!step_ok || !half_finite(mn)) {
        throw Error(fmt::format("palu: corrupt {} codes: block {}, grid of the {} latents stores step {} "
                                "and minimum {}; expected a finite step >= 0 and a finite minimum",
                                cfg_.stream, t, p.name, f16_to_f32(step),
                                f16_to_f32(mn)));
      }
    }
  }
}

}  // namespace veloxquant::palu
