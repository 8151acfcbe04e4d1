// KVCache::evict: the policy ranks, select.h picks whole units under the budget, and the
// streams are rebuilt from the kept units, so evicted tokens give their memory back.
#include <algorithm>

#include "cache/eviction/select.h"
#include "cache/kv_cache_impl.h"

namespace veloxquant {
namespace {

// The stream with only the kept stream-token ranges, oldest first. Each range is whole blocks of
// the encoded part and/or whole rows of the tail, since units never cut a block.
CacheStream kept_part(const CacheStream& s, const Codec& codec, size_t row_bytes,
                      const std::vector<Unit>& kept) {
  CacheStream out;
  size_t code_bytes = 0, tail_rows = 0;
  for (const Unit& u : kept) {
    const size_t enc_end = std::min(u.end, s.encoded);
    if (u.begin < enc_end) code_bytes += codec.code_bytes(enc_end - u.begin);
    if (u.end > s.encoded) tail_rows += u.end - std::max(u.begin, s.encoded);
  }
  out.codes.reserve(code_bytes);
  out.tail.reserve(tail_rows * row_bytes);
  for (const Unit& u : kept) {
    const size_t enc_end = std::min(u.end, s.encoded);
    if (u.begin < enc_end) {
      const auto first = s.codes.begin() + static_cast<std::ptrdiff_t>(codec.code_bytes(u.begin));
      out.codes.insert(out.codes.end(), first,
                       first + static_cast<std::ptrdiff_t>(codec.code_bytes(enc_end - u.begin)));
      out.encoded += enc_end - u.begin;
    }
    const size_t tail_begin = std::max(u.begin, s.encoded);
    if (tail_begin < u.end) {
      const auto first = s.tail.begin() + static_cast<std::ptrdiff_t>((tail_begin - s.encoded) * row_bytes);
      out.tail.insert(out.tail.end(), first, first + static_cast<std::ptrdiff_t>((u.end - tail_begin) * row_bytes));
      out.tail_tokens += u.end - tail_begin;
    }
  }
  return out;
}

template <class T>
void keep_entries(std::vector<T>& v, const std::vector<Unit>& units, const std::vector<bool>& keep) {
  size_t at = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!keep[u]) continue;
    for (size_t t = units[u].begin; t < units[u].end; ++t) v[at++] = v[t];
  }
  v.resize(at);
  v.shrink_to_fit();
}

}  // namespace

void KVCache::Impl::evict() {
  if (!policy) return;
  const size_t appended = pending;
  pending = 0;
  if (!policy->evicts_after(appended)) return;
  const std::vector<size_t> budgets = policy->head_budgets(scores);
  const size_t row_bytes = fp16.code_bytes(1);
  for (size_t h = 0; h < shape.kv_heads; ++h) {
    const size_t budget = std::max(budgets[h], min_budget);
    if (stored(h) <= budget) continue;
    const CacheStream &ks = keys[h], &vs = values[h];
    const std::vector<Unit> units = stored_units(
        sinks, ks.encoded + ks.tail_tokens, {ks.encoded, codecs.key->block_tokens()},
        {vs.encoded, codecs.value->block_tokens()});
    const std::vector<bool> keep =
        keep_units(units, scores[h].score, budget, sinks, policy->protected_recent());
    std::vector<Unit> kept;  // stream coordinates; the sinks always stay
    for (size_t u = 0; u < units.size(); ++u) {
      if (keep[u] && units[u].begin >= sinks) kept.push_back({units[u].begin - sinks, units[u].end - sinks});
    }
    keys[h] = kept_part(ks, *codecs.key, row_bytes, kept);
    values[h] = kept_part(vs, *codecs.value, row_bytes, kept);
    keep_entries(scores[h].score, units, keep);
    keep_entries(scores[h].position, units, keep);
  }
}

}  // namespace veloxquant
