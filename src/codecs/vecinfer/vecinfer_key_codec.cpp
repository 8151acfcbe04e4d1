#include "codecs/vecinfer/vecinfer_key_codec.h"

#include <fmt/format.h>

#include <algorithm>

#include "codecs/rabitq/ivf.h"
#include "codecs/vecinfer/key_transform.h"
#include "veloxquant/error.h"

namespace veloxquant::vecinfer {

VecinferKeyCodec::VecinferKeyCodec(size_t dim, size_t dims, size_t centroids, std::vector<HeadTables> heads)
    : dim_(dim),
      dims_(dims),
      centroids_(centroids),
      subspaces_(dim / dims),
      rotation_(key_rotation(dim)),
      heads_(std::make_shared<const std::vector<HeadTables>>(std::move(heads))) {}

size_t VecinferKeyCodec::state_bytes() const {
  const size_t per_head = 4 * dim_ + 2 * subspaces_ * centroids_ * dims_;
  return heads_->size() * per_head + rotation_.state_bytes();
}

std::vector<std::vector<uint8_t>> VecinferKeyCodec::fit_streams(const float*, size_t, size_t heads) const {
  return std::vector<std::vector<uint8_t>>(heads);
}

std::unique_ptr<Codec> VecinferKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                     size_t head) const {
  if (head >= states.size() || head >= heads_->size()) {
    throw Error(fmt::format("vecinfer: no tables for KV head {} ({} stream states, {} calibrated "
                            "heads); expected one per KV head", head, states.size(), heads_->size()));
  }
  if (!states[head].empty()) {
    throw Error(fmt::format("vecinfer: the stream state of KV head {} holds {} bytes; expected none "
                            "(the tables are calibrated, not fitted per stream)", head, states[head].size()));
  }
  auto codec = std::make_unique<VecinferKeyCodec>(*this);
  codec->head_ = head;
  return codec;
}

const HeadTables& VecinferKeyCodec::tables(const char* what) const {
  if (head_ == SIZE_MAX) {
    throw Error(fmt::format("vecinfer: {} on the prototype key codec, which belongs to no KV head; "
                            "expected the codec with_states() builds", what));
  }
  return (*heads_)[head_];
}

void VecinferKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const HeadTables& h = tables("encode");
  std::vector<float> y(x, x + n * dim_);
  transform_keys(rotation_, h.smooth, y.data(), n);
  const size_t book = centroids_ * dims_;
  for (size_t t = 0; t < n; ++t)
    for (size_t s = 0; s < subspaces_; ++s)
      codes[t * subspaces_ + s] = static_cast<uint8_t>(
          rabitq::nearest_centroid(y.data() + t * dim_ + s * dims_, h.codebooks.data() + s * book, centroids_, dims_));
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
