// KVCache::evict: the policy ranks, select.h picks whole units under the budget, and the kept
// units move down in place; memory is given back once half a buffer is unused.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "cache/eviction/select.h"
#include "cache/kv_cache_impl.h"

namespace veloxquant {
namespace {

// Gives memory back once at least half of a buffer's capacity is unused (a prompt compressed
// to its budget), without reallocating at every step of a rolling window.
template <class T>
void release_spare(std::vector<T>& v) {
  if (v.capacity() > 2 * v.size() + 64) v.shrink_to_fit();
}

// Keeps only the given stream-token ranges of `s`, oldest first, moving them down in place. Each
// range is whole blocks of the encoded part and/or whole rows of the tail, since units never cut a
// block. The codes are read front to back with Codec::encoded_bytes, which for a variable-length
// codec walks its blocks' stated lengths: a kept block only ever moves down over bytes already
// read, so the blocks still to read stay intact.
void keep_ranges(CacheStream& s, const Codec& codec, size_t row_bytes, const std::vector<Unit>& kept) {
  size_t codes_at = 0, tail_at = 0, encoded = 0, tail_tokens = 0;
  size_t read_token = 0, read_at = 0;  // the next unread encoded token and the byte it starts at
  for (const Unit& u : kept) {
    const size_t enc_end = std::min(u.end, s.encoded);
    if (u.begin < enc_end) {
      const size_t size = s.codes.size();
      read_at += codec.encoded_bytes(s.codes.data() + read_at, u.begin - read_token, size - read_at);
      const size_t bytes = codec.encoded_bytes(s.codes.data() + read_at, enc_end - u.begin, size - read_at);
      std::memmove(s.codes.data() + codes_at, s.codes.data() + read_at, bytes);
      codes_at += bytes;
      read_at += bytes;
      read_token = enc_end;
      encoded += enc_end - u.begin;
    }
    const size_t tail_begin = std::max(u.begin, s.encoded);
    if (tail_begin < u.end) {
      const size_t bytes = (u.end - tail_begin) * row_bytes;
      std::memmove(s.tail.data() + tail_at, s.tail.data() + (tail_begin - s.encoded) * row_bytes, bytes);
      tail_at += bytes;
      tail_tokens += u.end - tail_begin;
    }
  }
  s.codes.resize(codes_at);
  s.tail.resize(tail_at);
  s.encoded = encoded;
  s.tail_tokens = tail_tokens;
  release_spare(s.codes);
  release_spare(s.tail);
}

template <class T>
void keep_entries(std::vector<T>& v, const std::vector<Unit>& units, const std::vector<bool>& keep) {
  size_t at = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!keep[u]) continue;
    for (size_t t = units[u].begin; t < units[u].end; ++t) v[at++] = v[t];
  }
  v.resize(at);
  release_spare(v);
}

template <class T>
void erase_range(std::vector<T>& v, size_t from, size_t n) {
  v.erase(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + n));
}

}  // namespace

void KVCache::Impl::evict() {
  if (!policy) return;
  const size_t appended = pending;
  pending = 0;
  if (!policy->evicts_after(appended, prompt_step)) return;
  if (policy->reads_contents()) {
    const size_t d = shape.head_dim;
    for (size_t h = 0; h < shape.kv_heads; ++h) {
      std::vector<float> k(stored(h) * d), v(stored(h) * d);
      decode_head(h, k.data(), v.data());
      policy->score_contents(h, k.data(), v.data(), stored(h), last_position + 1, rope, scores[h].score);
    }
  }
  const std::vector<size_t> budgets = policy->head_budgets(scores);
  const size_t row_bytes = fp16.code_bytes(1);
  for (size_t h = 0; h < shape.kv_heads; ++h) {
    const size_t budget = std::max(budgets[h], min_budget);
    if (stored(h) <= budget) continue;
    const CacheStream &ks = keys[h], &vs = values[h];
    const std::vector<Unit> units = stored_units(sinks, ks.encoded + ks.tail_tokens,
                                                 {ks.encoded, codecs.key->block_tokens()},
                                                 {vs.encoded, codecs.value->block_tokens()});
    const std::vector<bool> keep = keep_units(units, scores[h].score, budget, sinks,
                                              policy->protected_recent());
    std::vector<Unit> kept;  // stream coordinates; the sinks always stay
    for (size_t u = 0; u < units.size(); ++u) {
      if (keep[u] && units[u].begin >= sinks) kept.push_back({units[u].begin - sinks, units[u].end - sinks});
    }
    keep_ranges(keys[h], key_codec(h), row_bytes, kept);
    keep_ranges(values[h], value_codec(h), row_bytes, kept);
    keep_entries(scores[h].score, units, keep);
    keep_entries(scores[h].position, units, keep);
  }
}

void KVCache::Impl::drop_outside_window() {
  const size_t w = shape.window;
  if (w == 0 || cross) return;
  // The next query sits one past the newest token and sees positions > newest + 1 - w; so
  // does every later one. Whole blocks leave, of both streams at once, as with eviction.
  const size_t block = std::lcm(codecs.key->block_tokens(), codecs.value->block_tokens());
  size_t cut = std::numeric_limits<size_t>::max();
  for (size_t h = 0; h < shape.kv_heads; ++h) {
    const size_t stream = keys[h].encoded + keys[h].tail_tokens;
    size_t unseen = 0;  // leading stream tokens no later query sees
    if (!policy) {
      unseen = stream + 1 > w ? stream + 1 - w : 0;
    } else {
      const int64_t first_seen = last_position + 2 - static_cast<int64_t>(w);
      while (unseen < stream && stream_position(h, unseen) < first_seen) ++unseen;
    }
    cut = std::min(cut, std::min({unseen, keys[h].encoded, values[h].encoded}) / block * block);
  }
  if (cut == 0) return;
  const size_t row_bytes = fp16.code_bytes(1);
  for (size_t h = 0; h < shape.kv_heads; ++h) {
    const std::vector<Unit> rest{{cut, keys[h].encoded + keys[h].tail_tokens}};
    keep_ranges(keys[h], key_codec(h), row_bytes, rest);
    keep_ranges(values[h], value_codec(h), row_bytes, rest);
    if (policy) {
      erase_range(scores[h].score, sinks, cut);
      erase_range(scores[h].position, sinks, cut);
    }
    if (salient) {
      // Saliency is tracked from stream token attention_first on; what it had of the cut goes.
      const size_t lost = cut > attention_first ? cut - attention_first : 0;
      erase_range(attention[h], 0, lost);
      erase_range(attention_rows[h], 0, lost);
    }
  }
  if (salient) attention_first = attention_first > cut ? attention_first - cut : 0;
  if (!policy) dropped += cut;
}

}  // namespace veloxquant
