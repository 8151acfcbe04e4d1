#include "codecs/spectral/spectral_key_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "veloxquant/error.h"

namespace veloxquant::spectral {
namespace {

constexpr size_t kNormBytes = 4;

// Index of the level nearest x among ascending levels (ties to the lower one): a binary search,
// as the signal directions can have up to 256 levels.
uint32_t nearest(const float* levels, size_t count, float x) {
  const float* hi = std::lower_bound(levels, levels + count, x);
  if (hi == levels) return 0;
  if (hi == levels + count) return static_cast<uint32_t>(count - 1);
  return static_cast<uint32_t>(x - hi[-1] <= *hi - x ? hi - 1 - levels : hi - levels);
}

float load_norm(const uint8_t* rec) {
  float norm;
  std::memcpy(&norm, rec, sizeof norm);
  return norm;
}

}  // namespace

void rotate(const std::vector<float>& rotation, const float* x, float* y, size_t dim) {
  for (size_t j = 0; j < dim; ++j) {
    const float* r = rotation.data() + j * dim;
    float s = 0;
    for (size_t c = 0; c < dim; ++c) s += r[c] * x[c];
    y[j] = s;
  }
}

SpectralKeyCodec::SpectralKeyCodec(size_t dim, size_t code_bits, std::vector<HeadBasis> heads)
    : dim_(dim), stride_(kNormBytes + (code_bits + 7) / 8),
      heads_(std::make_shared<const std::vector<HeadBasis>>(std::move(heads))) {}

size_t SpectralKeyCodec::state_bytes() const {
  size_t bytes = 0;
  for (const HeadBasis& h : *heads_) bytes += 4 * (h.rotation.size() + h.levels.size()) + h.bits.size();
  return bytes;
}

std::vector<std::vector<uint8_t>> SpectralKeyCodec::fit_streams(const float*, size_t, size_t heads) const {
  std::vector<std::vector<uint8_t>> states(heads, std::vector<uint8_t>(4));
  for (size_t h = 0; h < heads; ++h) {
    const auto index = static_cast<uint32_t>(h);
    std::memcpy(states[h].data(), &index, sizeof index);
  }
  return states;
}

std::unique_ptr<Codec> SpectralKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                     size_t head) const {
  if (head >= states.size() || head >= heads_->size()) {
    throw Error(fmt::format("spectral: no basis for KV head {} ({} stream states, {} calibrated heads); "
                            "expected one per KV head", head, states.size(), heads_->size()));
  }
  uint32_t index = 0;
  if (states[head].size() == sizeof index) std::memcpy(&index, states[head].data(), sizeof index);
  if (states[head].size() != sizeof index || index != head) {
    throw Error(fmt::format("spectral: the stream state of KV head {} is not that head's index ({} bytes, "
                            "index {}); expected the 4 bytes fit_streams() writes", head, states[head].size(),
                            states[head].size() == sizeof index ? std::to_string(index) : std::string("none")));
  }
  auto codec = std::make_unique<SpectralKeyCodec>(*this);
  codec->head_ = head;
  const HeadBasis& b = (*heads_)[head];
  codec->dirs_.level_offset.resize(dim_ + 1);
  codec->dirs_.bit_offset.resize(dim_ + 1);
  codec->dirs_.level_offset[0] = codec->dirs_.bit_offset[0] = 0;
  for (size_t j = 0; j < dim_; ++j) {
    codec->dirs_.level_offset[j + 1] = codec->dirs_.level_offset[j] + (uint32_t{1} << b.bits[j]);
    codec->dirs_.bit_offset[j + 1] = codec->dirs_.bit_offset[j] + b.bits[j];
  }
  return codec;
}

const HeadBasis& SpectralKeyCodec::basis() const {
  if (head_ == SIZE_MAX) {
    throw Error("spectral: this codec is the prototype make() returns and belongs to no KV head; "
                "expected the codec with_states() builds from fit_streams()");
  }
  return (*heads_)[head_];
}

void SpectralKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const HeadBasis& b = basis();
  std::vector<float> y(dim_);
  for (size_t t = 0; t < n; ++t) {
    const float* xt = x + t * dim_;
    uint8_t* rec = codes + t * stride_;
    std::fill(rec, rec + stride_, uint8_t{0});
    double sq = 0;
    for (size_t c = 0; c < dim_; ++c) sq += static_cast<double>(xt[c]) * xt[c];
    const auto norm = static_cast<float>(std::sqrt(sq));
    std::memcpy(rec, &norm, sizeof norm);
    if (!(norm > 0)) continue;  // a zero key decodes to zero whatever its codes
    rotate(b.rotation, xt, y.data(), dim_);
    uint8_t* bits = rec + kNormBytes;
    for (size_t j = 0; j < dim_; ++j) {
      const uint32_t first = dirs_.level_offset[j];
      const uint32_t code = nearest(b.levels.data() + first, dirs_.level_offset[j + 1] - first, y[j] / norm);
      for (uint32_t k = 0, at = dirs_.bit_offset[j]; k < b.bits[j]; ++k, ++at) {
        bits[at / 8] = static_cast<uint8_t>(bits[at / 8] | (((code >> k) & 1u) << (at % 8)));
      }
    }
  }
}

void SpectralKeyCodec::level_indices(const uint8_t* rec, uint32_t* idx) const {
  const uint8_t* bits = rec + kNormBytes;
  for (size_t j = 0; j < dim_; ++j) {
    // A code of at most 8 bits lies in one byte or straddles two; the second is read only when the
    // code reaches into it, and a direction of 0 bits (its one level) reads none, so nothing past
    // the record's last code byte is read.
    const uint32_t at = dirs_.bit_offset[j], width = dirs_.bit_offset[j + 1] - at, shift = at % 8;
    if (width == 0) {
      idx[j] = dirs_.level_offset[j];
      continue;
    }
    uint32_t window = bits[at / 8];
    if (shift + width > 8) window |= uint32_t{bits[at / 8 + 1]} << 8;
    idx[j] = dirs_.level_offset[j] + ((window >> shift) & ((1u << width) - 1));
  }
}

void SpectralKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const HeadBasis& b = basis();
  std::vector<uint32_t> idx(dim_);
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * stride_;
    const float norm = load_norm(rec);
    level_indices(rec, idx.data());
    float* xt = x + t * dim_;
    std::fill(xt, xt + dim_, 0.0f);
    // x = ||x|| R^T l: the rows of R weighted by the levels.
    for (size_t j = 0; j < dim_; ++j) {
      const float w = norm * b.levels[idx[j]];
      const float* r = b.rotation.data() + j * dim_;
      for (size_t c = 0; c < dim_; ++c) xt[c] += w * r[c];
    }
  }
}

void SpectralKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    const float norm = load_norm(codes + t * stride_);
    if (!(norm >= 0) || !std::isfinite(norm)) {
      throw Error(fmt::format("spectral: corrupt key codes: token {} stores norm {}; expected a finite "
                              "norm >= 0", t, norm));
    }
  }
}

// q . x_t = ||x_t|| (R q) . l_t: each query is rotated once, then every token costs one gathered
// level per direction instead of a dim x dim inverse rotation.
void SpectralKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const HeadBasis& b = basis();
  std::vector<float> rq(nq * dim_);
  for (size_t i = 0; i < nq; ++i) rotate(b.rotation, q + i * dim_, rq.data() + i * dim_, dim_);
  std::vector<uint32_t> idx(dim_);
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * stride_;
    const float norm = load_norm(rec);
    level_indices(rec, idx.data());
    for (size_t i = 0; i < nq; ++i) {
      const float* qi = rq.data() + i * dim_;
      float s = 0;
      for (size_t j = 0; j < dim_; ++j) s += qi[j] * b.levels[idx[j]];
      scores[i * n + t] = norm * s;
    }
  }
}

}  // namespace veloxquant::spectral
