#include "codecs/rabitq/rabitq_key_codec.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/bitpack.h"
#include "core/kmeans.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::rabitq {
namespace {

float read_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

RabitqKeyCodec::RabitqKeyCodec(size_t dim, size_t nlist, uint64_t rotation_seed, uint64_t cluster_seed)
    : dim_(dim),
      nlist_(nlist),
      cluster_seed_(cluster_seed),
      rotation_(dim, rotation_seed),
      format_{sizeof(float) + packed_bytes(dim, 1) + 1, 0, sizeof(float)},
      cluster_offset_(sizeof(float) + packed_bytes(dim, 1)),
      signs_(dim, 1, {-1.0f, 1.0f}) {}

std::vector<std::vector<uint8_t>> RabitqKeyCodec::fit_streams(const float* x, size_t n, size_t heads) const {
  if (n == 0) throw ShapeError("rabitq: fitting the IVF centroids needs at least one key; got 0 tokens");
  std::vector<std::vector<uint8_t>> states(heads);
  for (size_t h = 0; h < heads; ++h) {
    const std::vector<float> c = kmeans(x + h * dim_, n, heads * dim_, dim_, nlist_, cluster_seed_ + h);
    states[h].resize(c.size() * 2);
    for (size_t i = 0; i < c.size(); ++i) {
      const uint16_t half = f32_to_f16(c[i]);
      std::memcpy(states[h].data() + 2 * i, &half, 2);
    }
  }
  return states;
}

std::unique_ptr<Codec> RabitqKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                   size_t head) const {
  if (head >= states.size()) {
    throw Error(fmt::format("rabitq: no centroids for head {} among {} stream states; expected one "
                            "per KV head", head, states.size()));
  }
  const std::vector<uint8_t>& s = states[head];
  if (s.size() != stream_state_bytes()) {
    throw Error(fmt::format("rabitq: head {}'s centroids take {} bytes; expected {} ({} fp16 "
                            "centroids of {})", head, s.size(), stream_state_bytes(), nlist_, dim_));
  }
  auto codec = std::make_unique<RabitqKeyCodec>(*this);
  codec->centroids_.resize(nlist_ * dim_);
  for (size_t i = 0; i < codec->centroids_.size(); ++i) {
    uint16_t half;
    std::memcpy(&half, s.data() + 2 * i, 2);
    const float v = f16_to_f32(half);
    if (!std::isfinite(v)) {
      throw Error(fmt::format("rabitq: head {}'s centroid {} holds {} at channel {}; expected a "
                              "finite value", head, i / dim_, v, i % dim_));
    }
    codec->centroids_[i] = v;
  }
  codec->rotated_centroids_ = codec->centroids_;
  codec->rotation_.forward(codec->rotated_centroids_.data(), nlist_);
  return codec;
}

void RabitqKeyCodec::require_fitted(const char* what) const {
  if (centroids_.empty()) {
    throw Error(fmt::format("rabitq: {} on the prototype key codec, which has no centroids; "
                            "expected the codec with_states() builds from fit_streams()", what));
  }
}

void RabitqKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  require_fitted("encode");
  std::vector<float> y(dim_);
  std::vector<uint8_t> bits(dim_);
  const double root_d = std::sqrt(static_cast<double>(dim_));
  for (size_t t = 0; t < n; ++t) {
    const float* k = x + t * dim_;
    const size_t j = nearest_centroid(k, centroids_.data(), nlist_, dim_);
    double norm2 = 0;
    for (size_t c = 0; c < dim_; ++c) {
      y[c] = k[c] - centroids_[j * dim_ + c];
      norm2 += static_cast<double>(y[c]) * y[c];
    }
    rotation_.forward(y.data());
    // s = ||r|| / <o_bar, o> with <o_bar, o> = ||P r||_1 / (sqrt(D) ||r||): ||r||^2 sqrt(D) / ||P r||_1.
    double l1 = 0;
    for (size_t c = 0; c < dim_; ++c) {
      l1 += std::fabs(y[c]);
      bits[c] = y[c] >= 0;
    }
    const float s = l1 > 0 ? static_cast<float>(norm2 * root_d / l1) : 0.0f;
    uint8_t* rec = codes + t * format_.stride;
    std::memcpy(rec, &s, sizeof s);
    pack_bits(bits.data(), dim_, 1, rec + format_.code_offset);
    rec[cluster_offset_] = static_cast<uint8_t>(j);
  }
}

void RabitqKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  decode_records(codes, n, x, false);
}

void RabitqKeyCodec::decode_in_basis(const uint8_t* codes, size_t n, float* y) const {
  decode_records(codes, n, y, true);
}

void RabitqKeyCodec::decode_records(const uint8_t* codes, size_t n, float* x, bool in_basis) const {
  require_fitted("decode");
  std::vector<uint8_t> bits(dim_);
  const float unit = 1.0f / std::sqrt(static_cast<float>(dim_));
  const std::vector<float>& centroids = in_basis ? rotated_centroids_ : centroids_;
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * format_.stride;
    const float s = read_f32(rec);
    unpack_bits(rec + format_.code_offset, dim_, 1, bits.data());
    float* row = x + t * dim_;
    for (size_t c = 0; c < dim_; ++c) row[c] = bits[c] ? s * unit : -s * unit;
    if (!in_basis) rotation_.inverse(row);
    const float* centroid = centroids.data() + rec[cluster_offset_] * dim_;
    for (size_t c = 0; c < dim_; ++c) row[c] += centroid[c];
  }
}

void RabitqKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * format_.stride;
    const float s = read_f32(rec);
    if (!(s >= 0) || !std::isfinite(s)) {
      throw Error(fmt::format("rabitq: corrupt codes: token {} stores scale {}; expected a finite "
                              "scale >= 0", t, s));
    }
    if (rec[cluster_offset_] >= nlist_) {
      throw Error(fmt::format("rabitq: corrupt codes: token {} names cluster {}; expected one of "
                              "the {} clusters", t, rec[cluster_offset_], nlist_));
    }
  }
}

// q . k_t = q . c_j(t) + s_t <x_t, P q>: per call each query is rotated once and its products
// with the nlist centroids taken once; the sign bits are summed by the 1-bit kernel.
void RabitqKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  require_fitted("score");
  const size_t P = signs_.positions();
  std::vector<float> rotated(q, q + nq * dim_), qk(nq * P), centroid_dots(nq * nlist_);
  rotation_.forward(rotated.data(), nq);
  for (size_t i = 0; i < nq; ++i) {
    signs_.to_kernel_order(rotated.data() + i * dim_, qk.data() + i * P);
    for (size_t j = 0; j < nlist_; ++j) {
      float d = 0;
      for (size_t c = 0; c < dim_; ++c) d += q[i * dim_ + c] * centroids_[j * dim_ + c];
      centroid_dots[i * nlist_ + j] = d;
    }
  }
  signs_.dot(qk.data(), nq, codes, n, format_, 1.0f / std::sqrt(static_cast<float>(dim_)), scores);
  for (size_t i = 0; i < nq; ++i)
    for (size_t t = 0; t < n; ++t)
      scores[i * n + t] += centroid_dots[i * nlist_ + codes[t * format_.stride + cluster_offset_]];
}

}  // namespace veloxquant::rabitq
