#include "codecs/kvquant/kvquant_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/nuq_levels.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kvquant {
namespace {

struct Range {
  float mid, half;
};

Range range_of(float lo, float hi) { return {(lo + hi) * 0.5f, (hi - lo) * 0.5f}; }

float normalized(float x, Range r) {
  return r.half > 0 ? std::clamp((x - r.mid) / r.half, -1.0f, 1.0f) : 0.0f;
}

}  // namespace

KvquantCodec::KvquantCodec(size_t dim, Axis axis, const KvquantConfig& cfg, std::vector<HeadTables> heads)
    : dim_(dim), axis_(axis), cfg_(cfg),
      slots_(cfg.sink ? std::max<size_t>(cfg.outliers, 1) : cfg.outliers),
      heads_(std::make_shared<const std::vector<HeadTables>>(std::move(heads))) {
  token_bytes_ = codes_offset() + packed_bytes(dim_, cfg_.bits) + 4 * slots_;
}

size_t KvquantCodec::slots_offset() const { return codes_offset() + packed_bytes(dim_, cfg_.bits); }

size_t KvquantCodec::state_bytes() const {
  // The prototype holds every KV head's tables; a stream's codec its own head's, so that a cache
  // adding up its streams' codecs counts each head's tables once.
  size_t floats = 0;
  for (size_t h = 0; h < heads_->size(); ++h) {
    const HeadTables& t = (*heads_)[h];
    if (head_ == SIZE_MAX || head_ == h) floats += t.levels.size() + t.lo.size() + t.hi.size();
  }
  return 4 * floats;
}

std::vector<std::vector<uint8_t>> KvquantCodec::fit_streams(const float* x, size_t n, size_t heads) const {
  std::vector<std::vector<uint8_t>> states(heads);
  if (!cfg_.sink || n == 0) return states;
  for (size_t h = 0; h < heads; ++h) {
    states[h].resize(2 * dim_);
    for (size_t c = 0; c < dim_; ++c) store_half(states[h].data() + 2 * c, f32_to_f16(x[h * dim_ + c]));
  }
  return states;
}

std::unique_ptr<Codec> KvquantCodec::with_states(const std::vector<std::vector<uint8_t>>& states,
                                                 size_t head) const {
  if (head >= states.size() || head >= heads_->size()) {
    throw Error(fmt::format("kvquant_nuq: no tables for KV head {} ({} stream states, {} calibrated "
                            "heads); expected one per KV head", head, states.size(), heads_->size()));
  }
  auto codec = std::make_unique<KvquantCodec>(*this);
  codec->head_ = head;
  const std::vector<uint8_t>& s = states[head];
  if (s.size() != stream_state_bytes()) {
    throw Error(fmt::format("kvquant_nuq: the stream state of KV head {} holds {} bytes; expected {} "
                            "(the first token in fp16{})", head, s.size(), stream_state_bytes(),
                            cfg_.sink ? "" : ", none without the sink"));
  }
  codec->sink_.resize(s.size() / 2);
  for (size_t c = 0; c < codec->sink_.size(); ++c) {
    codec->sink_[c] = load_half(s.data() + 2 * c);
    if (!std::isfinite(f16_to_f32(codec->sink_[c]))) {
      throw Error(fmt::format("kvquant_nuq: the first token of KV head {} holds a non-finite value "
                              "at channel {}", head, c));
    }
  }
  return codec;
}

const HeadTables& KvquantCodec::tables() const {
  if (head_ == SIZE_MAX) {
    throw Error("kvquant_nuq: this codec is the prototype make() returns and belongs to no KV head; "
                "expected the codec with_states() builds from fit_streams()");
  }
  return (*heads_)[head_];
}

void KvquantCodec::encode_token(const float* x, const HeadTables& t, uint8_t* out) const {
  const size_t d = dim_;
  uint8_t* slot = out + slots_offset();
  if (!sink_.empty()) {
    bool first = true;
    for (size_t c = 0; c < d && first; ++c) first = f32_to_f16(x[c]) == sink_[c];
    if (first) {  // the stream's first token (or one equal to it in fp16): read from the state
      std::fill(out, out + token_bytes_, uint8_t{0});
      for (size_t s = 0; s < slots_; ++s) store_half(slot + 4 * s, kEmptySlot);
      store_half(slot, kSinkSlot);
      return;
    }
  }
  // Outliers: the k elements furthest outside the dense range (keys: normalized by their
  // channel's calibrated range; values: by magnitude, before the token's range is known).
  thread_local std::vector<float> score;
  thread_local std::vector<uint32_t> order;
  score.resize(d);
  order.resize(d);
  for (size_t c = 0; c < d; ++c) {
    score[c] = axis_ == Axis::PerChannel
                   ? std::fabs((x[c] - (t.lo[c] + t.hi[c]) * 0.5f) / ((t.hi[c] - t.lo[c]) * 0.5f))
                   : std::fabs(x[c]);
  }
  std::iota(order.begin(), order.end(), 0u);
  const size_t k = cfg_.outliers;
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](uint32_t a, uint32_t b) { return score[a] > score[b] || (score[a] == score[b] && a < b); });
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  thread_local std::vector<uint8_t> is_outlier;
  is_outlier.assign(d, 0);
  for (size_t s = 0; s < k; ++s) is_outlier[order[s]] = 1;

  Range token{};
  if (axis_ == Axis::PerToken) {
    float lo = INFINITY, hi = -INFINITY;
    for (size_t c = 0; c < d; ++c) {
      if (is_outlier[c]) continue;
      lo = std::min(lo, x[c]);
      hi = std::max(hi, x[c]);
    }
    const uint16_t lo16 = f32_to_f16(lo), hi16 = f32_to_f16(hi);
    store_half(out, lo16);
    store_half(out + 2, hi16);
    token = range_of(f16_to_f32(lo16), f16_to_f32(hi16));  // what decode() will read
  }
  thread_local std::vector<uint8_t> codes;
  codes.resize(d);
  for (size_t c = 0; c < d; ++c) {
    const Range r = axis_ == Axis::PerChannel ? range_of(t.lo[c], t.hi[c]) : token;
    codes[c] = is_outlier[c] ? 0 : nearest_level(t.levels, normalized(x[c], r));
  }
  pack_bits(codes.data(), d, cfg_.bits, out + codes_offset());
  for (size_t s = 0; s < slots_; ++s) {
    if (s < k) {
      store_half(slot + 4 * s, static_cast<uint16_t>(order[s]));
      store_half(slot + 4 * s + 2, f32_to_f16(x[order[s]]));
    } else {
      store_half(slot + 4 * s, kEmptySlot);
      store_half(slot + 4 * s + 2, 0);
    }
  }
}

void KvquantCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const HeadTables& t = tables();
  for (size_t i = 0; i < n; ++i) encode_token(x + i * dim_, t, codes + i * token_bytes_);
}

void KvquantCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  const HeadTables& t = tables();
  const size_t d = dim_;
  std::vector<uint8_t> idx(d);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* in = codes + i * token_bytes_;
    const uint8_t* slot = in + slots_offset();
    float* row = x + i * d;
    if (slots_ > 0 && load_half(slot) == kSinkSlot) {
      for (size_t c = 0; c < d; ++c) row[c] = f16_to_f32(sink_[c]);
      continue;
    }
    unpack_bits(in + codes_offset(), d, cfg_.bits, idx.data());
    if (axis_ == Axis::PerChannel) {
      for (size_t c = 0; c < d; ++c) {
        const Range r = range_of(t.lo[c], t.hi[c]);
        row[c] = r.mid + r.half * t.levels[idx[c]];
      }
    } else {
      const Range r = range_of(f16_to_f32(load_half(in)), f16_to_f32(load_half(in + 2)));
      for (size_t c = 0; c < d; ++c) row[c] = r.mid + r.half * t.levels[idx[c]];
    }
    for (size_t s = 0; s < cfg_.outliers; ++s) {
      row[load_half(slot + 4 * s)] = f16_to_f32(load_half(slot + 4 * s + 2));
    }
  }
}

void KvquantCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* in = codes + i * token_bytes_;
    const uint8_t* slot = in + slots_offset();
    auto bad = [&](const std::string& what) {
      throw Error(fmt::format("kvquant_nuq: token {}: {}", i, what));
    };
    const bool is_sink = slots_ > 0 && load_half(slot) == kSinkSlot;
    if (is_sink && !cfg_.sink) bad("marked as the stream's first token, but this codec keeps no sink");
    for (size_t s = is_sink ? 1 : 0; s < slots_; ++s) {
      const uint16_t index = load_half(slot + 4 * s);
      const float value = f16_to_f32(load_half(slot + 4 * s + 2));
      if (is_sink || s >= cfg_.outliers) {
        if (index != kEmptySlot) bad(fmt::format("slot {} holds index {}; expected the unused mark", s, index));
        continue;
      }
      if (index >= dim_) bad(fmt::format("outlier {} has index {}; expected < {}", s, index, dim_));
      if (s > 0 && index <= load_half(slot + 4 * (s - 1))) {
        bad(fmt::format("outlier {} has index {}, not above the previous one", s, index));
      }
      if (!std::isfinite(value)) bad(fmt::format("outlier {} holds {}; expected a finite value", s, value));
    }
    if (axis_ == Axis::PerToken && !is_sink) {
      const float lo = f16_to_f32(load_half(in)), hi = f16_to_f32(load_half(in + 2));
      if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) {
        bad(fmt::format("value range [{}, {}]; expected finite lo <= hi", lo, hi));
      }
    }
  }
}

}  // namespace veloxquant::kvquant
