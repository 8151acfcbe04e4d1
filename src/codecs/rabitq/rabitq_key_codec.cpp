#include "codecs/rabitq/rabitq_key_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

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

RabitqKeyCodec::RabitqKeyCodec(size_t dim, size_t nlist, uint64_t rotation_seed, uint64_t cluster_seed,
                               size_t nprobe)
    : dim_(dim),
      nlist_(nlist),
      nprobe_(nprobe),
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
  codec->search_ = CentroidSearch(codec->centroids_.data(), nlist_, dim_);
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
  constexpr size_t kChunk = 256;  // tokens rotated together
  const size_t d = dim_;
  std::vector<float> y(std::min(n, kChunk) * d);
  std::vector<double> norm2(std::min(n, kChunk)), dist(nlist_);
  std::vector<uint8_t> bits(d), cluster(std::min(n, kChunk));
  const double root_d = std::sqrt(static_cast<double>(d));
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    for (size_t t = 0; t < m; ++t) {
      const float* k = x + (t0 + t) * d;
      const size_t j = search_.nearest(k, dist.data());
      cluster[t] = static_cast<uint8_t>(j);
      double sum = 0;
      for (size_t c = 0; c < d; ++c) {
        y[t * d + c] = k[c] - centroids_[j * d + c];
        sum += static_cast<double>(y[t * d + c]) * y[t * d + c];
      }
      norm2[t] = sum;
    }
    rotation_.forward(y.data(), m);
    for (size_t t = 0; t < m; ++t) {
      const float* yt = y.data() + t * d;
      // s = ||r|| / <o_bar, o> with <o_bar, o> = ||P r||_1 / (sqrt(D) ||r||): ||r||^2 sqrt(D) / ||P r||_1.
      double l1 = 0;
      for (size_t c = 0; c < d; ++c) {
        l1 += std::fabs(yt[c]);
        bits[c] = yt[c] >= 0;
      }
      const float s = l1 > 0 ? static_cast<float>(norm2[t] * root_d / l1) : 0.0f;
      uint8_t* rec = codes + (t0 + t) * format_.stride;
      std::memcpy(rec, &s, sizeof s);
      pack_bits(bits.data(), d, 1, rec + format_.code_offset);
      rec[cluster_offset_] = cluster[t];
    }
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
  const float unit = 1.0f / std::sqrt(static_cast<float>(dim_));
  const std::vector<float>& centroids = in_basis ? rotated_centroids_ : centroids_;
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * format_.stride;
    const float su = read_f32(rec) * unit;
    float* row = x + t * dim_;
    // Bit 1 is +su, bit 0 is -su: the grid {-su, su}, exact (2 su - su rounds to su).
    unpack_affine_f32(rec + format_.code_offset, dim_, 1, -su, 2 * su, row);
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

std::vector<float> RabitqKeyCodec::centroid_dots(const float* q, size_t nq) const {
  std::vector<float> dots(nq * nlist_);
  for (size_t i = 0; i < nq; ++i)
    for (size_t j = 0; j < nlist_; ++j) {
      float d = 0;
      for (size_t c = 0; c < dim_; ++c) d += q[i * dim_ + c] * centroids_[j * dim_ + c];
      dots[i * nlist_ + j] = d;
    }
  return dots;
}

void RabitqKeyCodec::probe(const float* dots, uint8_t* probed) const {
  std::vector<uint32_t> order(nlist_);
  std::iota(order.begin(), order.end(), 0u);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nprobe_), order.end(),
                    [&](uint32_t a, uint32_t b) {
                      return dots[a] > dots[b] || (dots[a] == dots[b] && a < b);
                    });
  std::fill(probed, probed + nlist_, uint8_t{0});
  for (size_t j = 0; j < nprobe_; ++j) probed[order[j]] = 1;
}

void RabitqKeyCodec::select(const float* q, size_t nq, const uint8_t* codes, size_t n, uint8_t* keep) const {
  require_fitted("select");
  if (!selects_tokens()) return Codec::select(q, nq, codes, n, keep);
  const std::vector<float> dots = centroid_dots(q, nq);
  std::vector<uint8_t> probed(nlist_);
  for (size_t i = 0; i < nq; ++i) {
    probe(dots.data() + i * nlist_, probed.data());
    for (size_t t = 0; t < n; ++t)
      keep[i * n + t] = t == 0 || probed[codes[t * format_.stride + cluster_offset_]];
  }
}

// q . k_t = q . c_j(t) + s_t <x_t, P q>: per call each query is rotated once and its products
// with the nlist centroids taken once; the sign bits are summed by the 1-bit kernel, over every
// token or, probing lists, over the records of the tokens each query reads, gathered.
void RabitqKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  require_fitted("score");
  const size_t P = signs_.positions();
  std::vector<float> rotated(q, q + nq * dim_), qk(nq * P);
  rotation_.forward(rotated.data(), nq);
  for (size_t i = 0; i < nq; ++i) signs_.to_kernel_order(rotated.data() + i * dim_, qk.data() + i * P);
  const std::vector<float> dots = centroid_dots(q, nq);
  const float unit = 1.0f / std::sqrt(static_cast<float>(dim_));
  const auto cluster = [&](size_t t) { return codes[t * format_.stride + cluster_offset_]; };
  const auto score_all = [&] {
    signs_.dot(qk.data(), nq, codes, n, format_, unit, scores);
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < n; ++t) scores[i * n + t] += dots[i * nlist_ + cluster(t)];
  };
  if (!selects_tokens()) return score_all();
  // The queries of a call (a KV head's query heads) read the union of their lists in one pass of
  // the kernel, over the gathered records unless the union holds most tokens; each query keeps
  // the scores of its own lists. The loops over tokens are branch-free: lists come in any order.
  std::vector<uint8_t> probed(nq * nlist_), any(nlist_, 0), lists(n);
  for (size_t i = 0; i < nq; ++i) {
    probe(dots.data() + i * nlist_, probed.data() + i * nlist_);
    for (size_t j = 0; j < nlist_; ++j) any[j] |= probed[i * nlist_ + j];
  }
  std::vector<uint32_t> read(n);
  size_t m = 0;
  for (size_t t = 0; t < n; ++t) {
    lists[t] = cluster(t);
    read[m] = static_cast<uint32_t>(t);
    m += static_cast<size_t>(t == 0 || any[lists[t]]);
  }
  const auto exclude_unprobed = [&](size_t i, float* row) {
    const uint8_t* own = probed.data() + i * nlist_;
    for (size_t t = 1; t < n; ++t) row[t] = own[lists[t]] ? row[t] : kExcluded;
  };
  if (2 * m > n) {
    score_all();
    for (size_t i = 0; i < nq; ++i) exclude_unprobed(i, scores + i * n);
    return;
  }
  std::vector<uint8_t> gathered(m * format_.stride);
  for (size_t k = 0; k < m; ++k)
    std::memcpy(&gathered[k * format_.stride], codes + read[k] * format_.stride, format_.stride);
  std::vector<float> part(nq * m);
  signs_.dot(qk.data(), nq, gathered.data(), m, format_, unit, part.data());
  for (size_t i = 0; i < nq; ++i) {
    float* row = scores + i * n;
    std::fill(row, row + n, 0.0f);
    for (size_t k = 0; k < m; ++k) row[read[k]] = part[i * m + k] + dots[i * nlist_ + lists[read[k]]];
    exclude_unprobed(i, row);
  }
}

}  // namespace veloxquant::rabitq
