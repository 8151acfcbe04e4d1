// How KVCache turns its fp16 tails into codes: blocks that aged out of the residual window are
// encoded per head (saliency codecs with the attention their tokens received), codecs fitted per
// stream are fitted first, and a cross-layer pair encodes what both of its layers hold.
#include <fmt/format.h>

#include <algorithm>

#include "cache/kv_cache_impl.h"
#include "core/parallel.h"
#include "veloxquant/error.h"

namespace veloxquant {

void KVCache::Impl::fit_streams_if_due() {
  const size_t h = shape.kv_heads, d = shape.head_dim;
  for (const bool is_key : {true, false}) {
    const Codec& prototype = is_key ? *codecs.key : *codecs.value;
    std::vector<std::unique_ptr<Codec>>& fitted = is_key ? key_fitted : value_fitted;
    std::vector<CacheStream>& streams = is_key ? keys : values;
    if (!prototype.fits_streams() || !fitted.empty()) continue;
    size_t n = streams[0].tail_tokens;
    for (const CacheStream& s : streams) n = std::min(n, s.tail_tokens);
    if (n < codecs.residual + prototype.block_tokens()) continue;  // no block to encode yet
    // Fitted to every token held so far (the prompt, at prefill), all heads side by side.
    std::vector<float> x(n * h * d), rows(n * d);
    for (size_t head = 0; head < h; ++head) {
      fp16.decode(streams[head].tail.data(), n, rows.data());
      for (size_t t = 0; t < n; ++t) std::copy_n(rows.data() + t * d, d, x.data() + (t * h + head) * d);
    }
    std::vector<std::vector<uint8_t>> states = prototype.fit_streams(x.data(), n, h);
    if (states.size() != h) {
      throw Error(fmt::format("{}: the codec fitted {} stream states for {} KV heads", spec.to_string(),
                              states.size(), h));
    }
    for (size_t head = 0; head < h; ++head) fitted.push_back(prototype.with_states(states, head));
    for (size_t head = 0; head < h; ++head) streams[head].state = std::move(states[head]);
  }
}

void KVCache::Impl::encode_aged(size_t head) {
  const size_t d = shape.head_dim, row_bytes = fp16.code_bytes(1);
  for (const bool is_key : {true, false}) {
    CacheStream& s = is_key ? keys[head] : values[head];
    const Codec& prototype = is_key ? *codecs.key : *codecs.value;
    // A stream that is to be fitted waits for its fit (heads that eviction left shorter).
    if (prototype.fits_streams() && (is_key ? key_fitted : value_fitted).empty()) continue;
    const Codec& codec = is_key ? key_codec(head) : value_codec(head);
    const size_t block = codec.block_tokens();
    if (s.tail_tokens < codecs.residual + block) continue;
    const size_t m = (s.tail_tokens - codecs.residual) / block * block;
    std::vector<float> x(m * d);
    fp16.decode(s.tail.data(), m, x.data());
    // code_bytes() is what encode may write; a variable-length codec writes less, and the stream
    // keeps only what it wrote.
    const size_t at = s.codes.size();
    s.codes.resize(at + codec.code_bytes(m));
    if (codec.wants_attention()) {
      // Normalized attention of the block's tokens; nullptr when no query has attended to them.
      std::vector<float> score(m, 0.0f);
      bool seen = false;
      for (size_t t = 0; t < m; ++t) {
        const size_t i = s.encoded + t - attention_first;
        const float rows = i < attention_rows[head].size() ? attention_rows[head][i] : 0.0f;
        if (rows > 0) score[t] = attention[head][i] / rows;
        seen = seen || rows > 0;
      }
      codec.encode_salient(x.data(), m, seen ? score.data() : nullptr, s.codes.data() + at);
    } else {
      codec.encode(x.data(), m, s.codes.data() + at);
    }
    s.codes.resize(at + codec.encoded_bytes(s.codes.data() + at, m, s.codes.size() - at));
    s.encoded += m;
    s.tail.erase(s.tail.begin(), s.tail.begin() + static_cast<std::ptrdiff_t>(m * row_bytes));
    s.tail_tokens -= m;
  }
}

void KVCache::Impl::encode_pair_aged() {
  Impl* other = partner();
  if (other == nullptr) return;  // a pair encodes only what both of its layers hold
  Impl& lead = follower ? *other : *this;
  Impl& next = follower ? *this : *other;
  const size_t h = shape.kv_heads, d = shape.head_dim, row_bytes = fp16.code_bytes(1);
  for (size_t head = 0; head < h; ++head) {
    if (lead.keys[head].encoded != next.keys[head].encoded ||
        lead.values[head].encoded != next.values[head].encoded) {
      throw Error(fmt::format("{}: layers {} and {} are a pair but KV head {} has encoded {} and {} "
                              "key tokens; expected the same (was one layer restored alone?)",
                              spec.to_string(), pair->leader, pair->leader + 1, head, lead.keys[head].encoded,
                              next.keys[head].encoded));
    }
  }
  parallel_for(
      h,
      [&](size_t head) {
        for (const bool is_key : {true, false}) {
          CacheStream& a = (is_key ? lead.keys : lead.values)[head];
          CacheStream& b = (is_key ? next.keys : next.values)[head];
          const PairCodec& codec = pair_codec(is_key);
          const size_t block = codec.block_tokens(), common = std::min(a.tail_tokens, b.tail_tokens);
          if (common < codecs.residual + block) continue;
          const size_t m = (common - codecs.residual) / block * block;
          std::vector<float> xa(m * d), xb(m * d);
          fp16.decode(a.tail.data(), m, xa.data());
          fp16.decode(b.tail.data(), m, xb.data());
          const size_t at_a = a.codes.size(), at_b = b.codes.size();
          a.codes.resize(at_a + codec.leader_bytes(m));
          b.codes.resize(at_b + codec.follower_bytes(m));
          codec.encode(xa.data(), xb.data(), m, a.codes.data() + at_a, b.codes.data() + at_b);
          for (CacheStream* s : {&a, &b}) {
            s->encoded += m;
            s->tail.erase(s->tail.begin(), s->tail.begin() + static_cast<std::ptrdiff_t>(m * row_bytes));
            s->tail_tokens -= m;
          }
        }
      },
      std::min(lead.keys[0].tail_tokens, next.keys[0].tail_tokens) * d * h >= kParallelAppendElements);
}

void KVCache::Impl::encode_all_aged() {
  if (pair) return encode_pair_aged();
  fit_streams_if_due();
  const size_t h = shape.kv_heads;
  parallel_for(
      h, [&](size_t head) { encode_aged(head); },
      keys[0].tail_tokens * shape.head_dim * h >= kParallelAppendElements);
  if (!salient) return;
  // What every stream of every head has encoded no longer needs its attention.
  size_t first = keys[0].encoded;
  for (size_t head = 0; head < h; ++head) first = std::min({first, keys[head].encoded, values[head].encoded});
  const auto drop = static_cast<std::ptrdiff_t>(first - attention_first);
  for (size_t head = 0; head < h; ++head) {
    attention[head].erase(attention[head].begin(), attention[head].begin() + drop);
    attention_rows[head].erase(attention_rows[head].begin(), attention_rows[head].begin() + drop);
  }
  attention_first = first;
}

void KVCache::Impl::note_attention(const std::vector<std::vector<float>>& mass, size_t nq, size_t group) {
  for (size_t head = 0; head < mass.size(); ++head) {
    const size_t n = stored(head);
    for (size_t t = attention_first; t < n; ++t) {
      attention[head][t - attention_first] += mass[head][t];
      // Query i of nq sees tokens up to n - nq + i: token t is seen by min(nq, n - t) of them.
      attention_rows[head][t - attention_first] += static_cast<float>(group * std::min(nq, n - t));
    }
  }
}

}  // namespace veloxquant
