#include "codecs/kivi_sink/kivi_sink_key_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/kept_rows.h"
#include "core/half_bytes.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kivi_sink {
namespace {

uint16_t load_index(const uint8_t* p, size_t i) {
  uint16_t v;
  std::memcpy(&v, p + 2 * i, 2);
  return v;
}

}  // namespace

KiviSinkKeyCodec::KiviSinkKeyCodec(size_t dim, unsigned bits, size_t group, size_t sinks, bool by_attention)
    : dim_(dim), group_(group), sinks_(sinks), kivi_bytes_(kivi::KiviKeyCodec(dim, bits, group).code_bytes(group)),
      block_bytes_(kivi_bytes_ + sinks * (2 + 2 * dim)), by_attention_(by_attention), kivi_(dim, bits, group) {}

void KiviSinkKeyCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  encode_salient(x, n, nullptr, codes);
}

void KiviSinkKeyCodec::encode_salient(const float* x, size_t n, const float* attention,
                                      uint8_t* codes) const {
  const size_t d = dim_;
  std::vector<float> rank(group_), block(group_ * d);
  for (size_t b = 0; b < n / group_; ++b) {
    const float* xb = x + b * group_ * d;
    uint8_t* out = codes + b * block_bytes_;
    for (size_t t = 0; t < group_; ++t) {
      // Key norm as the fallback: KVSink's sinks have outsized keys.
      rank[t] = attention && by_attention_ ? attention[b * group_ + t]
                          : static_cast<float>(std::sqrt(simd::dot(xb + t * d, xb + t * d, d)));
    }
    const std::vector<size_t> sinks = kept_rows::pick(rank.data(), group_, sinks_);
    // The grids see only the other tokens.
    std::copy_n(xb, group_ * d, block.data());
    kept_rows::fill(block.data(), group_, d, sinks);
    kivi_.encode(block.data(), group_, out);
    uint8_t* index = out + kivi_bytes_;
    uint8_t* rows = index + 2 * sinks_;
    for (size_t i = 0; i < sinks.size(); ++i) {
      const auto t = static_cast<uint16_t>(sinks[i]);
      std::memcpy(index + 2 * i, &t, 2);
      for (size_t c = 0; c < d; ++c) store_half(rows + 2 * (i * d + c), f32_to_f16(xb[sinks[i] * d + c]));
    }
  }
}

void KiviSinkKeyCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const size_t d = dim_;
  for (size_t b = 0; b < n / group_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    float* xb = x + b * group_ * d;
    kivi_.decode(in, group_, xb);
    const uint8_t* rows = in + kivi_bytes_ + 2 * sinks_;
    for (size_t i = 0; i < sinks_; ++i) {
      const size_t t = load_index(in + kivi_bytes_, i);
      for (size_t c = 0; c < d; ++c) xb[t * d + c] = f16_to_f32(load_half(rows + 2 * (i * d + c)));
    }
  }
}

void KiviSinkKeyCodec::check_codes(const uint8_t* codes, size_t n) const {
  const size_t d = dim_;
  for (size_t b = 0; b < n / group_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    kivi_.check_codes(in, group_);
    if (const std::string why = kept_rows::index_error(in + kivi_bytes_, sinks_, group_); !why.empty()) {
      throw Error("kivi_sink: corrupt codes: block " + std::to_string(b) + ", sink " + why);
    }
    for (size_t i = 0; i < sinks_; ++i) {
      const uint8_t* row = in + kivi_bytes_ + 2 * sinks_ + 2 * i * d;
      for (size_t c = 0; c < d; ++c) {
        if ((load_half(row + 2 * c) & 0x7C00) == 0x7C00) {
          throw Error("kivi_sink: corrupt codes: block " + std::to_string(b) + ", sink " + std::to_string(i) +
                      ", channel " + std::to_string(c) + " is not finite; expected a finite half");
        }
      }
    }
  }
}

void KiviSinkKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                             float* scores) const {
  const size_t d = dim_;
  std::vector<float> part(nq * group_), row(d);
  for (size_t b = 0; b < n / group_; ++b) {
    const uint8_t* in = codes + b * block_bytes_;
    kivi_.score(q, nq, in, group_, part.data());
    for (size_t i = 0; i < sinks_; ++i) {
      const size_t t = load_index(in + kivi_bytes_, i);
      const uint8_t* stored = in + kivi_bytes_ + 2 * sinks_ + 2 * i * d;
      for (size_t c = 0; c < d; ++c) row[c] = f16_to_f32(load_half(stored + 2 * c));
      for (size_t r = 0; r < nq; ++r) part[r * group_ + t] = simd::dot(q + r * d, row.data(), d);
    }
    for (size_t r = 0; r < nq; ++r) std::copy_n(part.data() + r * group_, group_, scores + r * n + b * group_);
  }
}

}  // namespace veloxquant::kivi_sink
