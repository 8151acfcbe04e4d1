#include "codecs/comm_vq/comm_vq_key_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/simd.h"
#include "veloxquant/error.h"

namespace veloxquant::comm_vq {

double encode_residual(const float* x, const float* codebooks, const float* norms, size_t books,
                       size_t entries, size_t dim, uint8_t* codes) {
  thread_local std::vector<float> r, dots;
  r.assign(x, x + dim);
  dots.resize(entries);
  for (size_t b = 0; b < books; ++b) {
    const float* book = codebooks + b * entries * dim;
    // argmin ||r - c||^2 = argmin ||c||^2 - 2 r.c, every centroid's dot product in one pass.
    simd::dot_f32_rows(r.data(), 1, book, entries, dim, dots.data());
    size_t best = 0;
    float best_cost = norms[b * entries] - 2 * dots[0];
    for (size_t e = 1; e < entries; ++e) {
      const float cost = norms[b * entries + e] - 2 * dots[e];
      if (cost < best_cost) best_cost = cost, best = e;
    }
    codes[b] = static_cast<uint8_t>(best);
    for (size_t c = 0; c < dim; ++c) r[c] -= book[best * dim + c];
  }
  double err = 0;
  for (size_t c = 0; c < dim; ++c) err += static_cast<double>(r[c]) * r[c];
  return err;
}

std::vector<float> centroid_norms(const Codebooks& codebooks, size_t dim) {
  std::vector<float> norms(codebooks.size() / dim);
  for (size_t i = 0; i < norms.size(); ++i) {
    double s = 0;
    for (size_t c = 0; c < dim; ++c) s += static_cast<double>(codebooks[i * dim + c]) * codebooks[i * dim + c];
    norms[i] = static_cast<float>(s);
  }
  return norms;
}

void decode_sum(const uint8_t* codes, const float* codebooks, size_t books, size_t entries,
                size_t dim, float* x) {
  std::fill(x, x + dim, 0.0f);
  for (size_t b = 0; b < books; ++b) {
    const float* c = codebooks + (b * entries + codes[b]) * dim;
    for (size_t i = 0; i < dim; ++i) x[i] += c[i];
  }
}

CommVqKeyCodec::CommVqKeyCodec(size_t dim, size_t books, size_t entries, std::vector<Codebooks> heads)
    : dim_(dim), books_(books), entries_(entries),
      heads_(std::make_shared<const std::vector<Codebooks>>(std::move(heads))) {}

std::vector<std::vector<uint8_t>> CommVqKeyCodec::fit_streams(const float*, size_t, size_t heads) const {
  std::vector<std::vector<uint8_t>> states(heads, std::vector<uint8_t>(4));
  for (size_t h = 0; h < heads; ++h) {
    const auto index = static_cast<uint32_t>(h);
    std::memcpy(states[h].data(), &index, sizeof index);
  }
  return states;
}

std::unique_ptr<Codec> CommVqKeyCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                   size_t head) const {
  if (head >= states.size() || head >= heads_->size()) {
    throw Error(fmt::format("comm_vq: no codebooks for KV head {} ({} stream states, {} calibrated "
                            "heads); expected one per KV head", head, states.size(), heads_->size()));
  }
  uint32_t index = 0;
  if (states[head].size() == sizeof index) std::memcpy(&index, states[head].data(), sizeof index);
  if (states[head].size() != sizeof index || index != head) {
    throw Error(fmt::format("comm_vq: the stream state of KV head {} is not that head's index ({} "
                            "bytes, index {}); expected the 4 bytes fit_streams() writes", head,
                            states[head].size(),
                            states[head].size() == sizeof index ? std::to_string(index) : std::string("none")));
  }
  auto codec = std::make_unique<CommVqKeyCodec>(*this);
  codec->head_ = head;
  codec->norms_ = centroid_norms((*heads_)[head], dim_);
  return codec;
}

const Codebooks& CommVqKeyCodec::codebooks() const {
  if (head_ == SIZE_MAX) {
    throw Error("comm_vq: this codec is the prototype make() returns and belongs to no KV head; "
                "expected the codec with_states() builds from fit_streams()");
  }
  return (*heads_)[head_];
}

void CommVqKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const Codebooks& books = codebooks();
  for (size_t t = 0; t < n; ++t) {
    encode_residual(x + t * dim_, books.data(), norms_.data(), books_, entries_, dim_, codes + t * books_);
  }
}

void CommVqKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const Codebooks& books = codebooks();
  for (size_t t = 0; t < n; ++t) decode_sum(codes + t * books_, books.data(), books_, entries_, dim_, x + t * dim_);
}

void CommVqKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  if (entries_ == 256) return;  // every byte is an index into a complete codebook
  for (size_t i = 0; i < n * books_; ++i) {
    if (codes[i] >= entries_) {
      throw Error(fmt::format("comm_vq: token {} has index {} in codebook {}; expected < {} entries",
                              i / books_, codes[i], i % books_, entries_));
    }
  }
}

}  // namespace veloxquant::comm_vq
