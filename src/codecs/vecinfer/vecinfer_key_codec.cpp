#include "codecs/vecinfer/vecinfer_key_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codecs/vecinfer/key_transform.h"
#include "core/half_bytes.h"
#include "core/kmeans.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::vecinfer {

VecinferKeyCodec::VecinferKeyCodec(size_t dim, size_t dims, size_t centroids, std::vector<HeadTables> heads)
    : dim_(dim),
      dims_(dims),
      centroids_(centroids),
      subspaces_(dim / dims),
      rotation_(key_rotation(dim)),
      heads_(std::make_shared<const std::vector<HeadTables>>(std::move(heads))) {}

std::vector<std::vector<uint8_t>> VecinferKeyCodec::fit_streams(const float*, size_t, size_t heads) const {
  if (heads > heads_->size()) {
    throw Error(fmt::format("vecinfer: {} KV heads to code and tables for {}; expected tables for "
                            "every KV head", heads, heads_->size()));
  }
  std::vector<std::vector<uint8_t>> states(heads);
  for (size_t h = 0; h < heads; ++h) {
    const HeadTables& t = (*heads_)[h];
    std::vector<uint8_t>& s = states[h];
    s.resize(stream_state_bytes());
    std::memcpy(s.data(), t.smooth.data(), 4 * dim_);
    for (size_t i = 0; i < t.codebooks.size(); ++i) store_half(s.data() + 4 * dim_ + 2 * i, f32_to_f16(t.codebooks[i]));
  }
  return states;
}

std::unique_ptr<Codec> VecinferKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                     size_t head) const {
  if (head >= states.size()) {
    throw Error(fmt::format("vecinfer: no tables for KV head {} among {} stream states; expected one "
                            "per KV head", head, states.size()));
  }
  const std::vector<uint8_t>& s = states[head];
  if (s.size() != stream_state_bytes()) {
    throw Error(fmt::format("vecinfer: the stream state of KV head {} holds {} bytes; expected {} "
                            "({} f32 smoothing factors, {} fp16 codebook entries)", head, s.size(),
                            stream_state_bytes(), dim_, subspaces_ * centroids_ * dims_));
  }
  HeadTables t;
  t.smooth.resize(dim_);
  std::memcpy(t.smooth.data(), s.data(), 4 * dim_);
  for (size_t c = 0; c < dim_; ++c) {
    if (!(t.smooth[c] > 0) || !std::isfinite(t.smooth[c])) {
      throw Error(fmt::format("vecinfer: the stream state of KV head {} holds smoothing factor {} for "
                              "key channel {}; expected a finite value > 0", head, t.smooth[c], c));
    }
  }
  t.codebooks.resize(subspaces_ * centroids_ * dims_);
  for (size_t i = 0; i < t.codebooks.size(); ++i) {
    t.codebooks[i] = f16_to_f32(load_half(s.data() + 4 * dim_ + 2 * i));
    if (!std::isfinite(t.codebooks[i])) {
      throw Error(fmt::format("vecinfer: the stream state of KV head {} holds codebook entry {} = {}; "
                              "expected a finite value", head, i, t.codebooks[i]));
    }
  }
  std::vector<CentroidSearch> searches;
  for (size_t sub = 0; sub < subspaces_; ++sub)
    searches.emplace_back(t.codebooks.data() + sub * centroids_ * dims_, centroids_, dims_);
  auto codec = std::make_unique<VecinferKeyCodec>(*this);
  codec->stream_ = std::make_shared<const HeadTables>(std::move(t));
  codec->searches_ = std::make_shared<const std::vector<CentroidSearch>>(std::move(searches));
  return codec;
}

const HeadTables& VecinferKeyCodec::tables(const char* what) const {
  if (!stream_) {
    throw Error(fmt::format("vecinfer: {} on the prototype key codec, which belongs to no KV head; "
                            "expected the codec with_states() builds", what));
  }
  return *stream_;
}

void VecinferKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const HeadTables& h = tables("encode");
  std::vector<float> y(x, x + n * dim_);
  transform_keys(rotation_, h.smooth, y.data(), n);
  // The nearest centroid as nearest_centroid finds it (CentroidSearch: the same sums), which the
  // GPU append reproduces bit for bit.
  std::vector<double> dist(centroids_);
  for (size_t t = 0; t < n; ++t)
    for (size_t s = 0; s < subspaces_; ++s)
      codes[t * subspaces_ + s] = static_cast<uint8_t>(
          (*searches_)[s].nearest(y.data() + t * dim_ + s * dims_, dist.data()));
}

void VecinferKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const HeadTables& h = tables("decode");
  const size_t book = centroids_ * dims_;
  for (size_t t = 0; t < n; ++t)
    for (size_t s = 0; s < subspaces_; ++s) {
      const float* c = h.codebooks.data() + s * book + codes[t * subspaces_ + s] * dims_;
      std::copy_n(c, dims_, x + t * dim_ + s * dims_);
    }
  restore_keys(rotation_, h.smooth, x, n);
}

void VecinferKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t i = 0; i < n * subspaces_; ++i) {
    if (codes[i] >= centroids_) {
      throw Error(fmt::format("vecinfer: corrupt codes: token {} names centroid {} in sub-space {}; "
                              "expected one of the {} centroids", i / subspaces_, codes[i],
                              i % subspaces_, centroids_));
    }
  }
}

void VecinferKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const HeadTables& h = tables("score");
  std::vector<float> rotated(q, q + nq * dim_);
  transform_queries(rotation_, h.smooth, rotated.data(), nq);
  // One query's table, [subspaces][centroids]: 16 KiB at the defaults, in L1 while the tokens
  // are summed.
  std::vector<float> table(subspaces_ * centroids_);
  for (size_t i = 0; i < nq; ++i) {
    for (size_t s = 0; s < subspaces_; ++s) {
      const float* qs = rotated.data() + i * dim_ + s * dims_;
      const float* book = h.codebooks.data() + s * centroids_ * dims_;
      for (size_t j = 0; j < centroids_; ++j) {
        float d = 0;
        for (size_t c = 0; c < dims_; ++c) d += qs[c] * book[j * dims_ + c];
        table[s * centroids_ + j] = d;
      }
    }
    for (size_t t = 0; t < n; ++t) {
      const uint8_t* code = codes + t * subspaces_;
      float sum = 0;
      for (size_t s = 0; s < subspaces_; ++s) sum += table[s * centroids_ + code[s]];
      scores[i * n + t] = sum;
    }
  }
}

}  // namespace veloxquant::vecinfer
