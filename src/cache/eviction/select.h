// Choosing what stays: the units a layer's stored tokens can leave in, and a greedy keep by
// score under a token budget, shared by every eviction policy.
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant {

// Stored tokens [begin, end) (cache order) that leave the cache together. A token still in the
// fp16 tail is a unit of its own; an encoded block leaves whole, because the codes of a block
// (KIVI's per-channel key scales over G tokens) cannot lose a token without re-encoding the
// others, and re-encoding would add error at every eviction. Codecs of one token per block
// (TurboQuant, QJL, PolarQuant, fp16) therefore evict token by token, exactly as the papers.
struct Unit {
  size_t begin, end;
  size_t size() const { return end - begin; }
};

// One stream's block layout: the first `encoded` tokens form blocks of `block` tokens.
struct StreamLayout {
  size_t encoded, block;
  bool boundary(size_t token) const { return token >= encoded || token % block == 0; }
};

// Units of `sinks` pinned tokens (one each) followed by the stream tokens, split only where
// both the key and the value stream may be cut.
std::vector<Unit> stored_units(size_t sinks, size_t stream_tokens, StreamLayout keys,
                               StreamLayout values);

// Which units stay: every unit holding one of the first `sinks` or last `recent` tokens, then the
// rest by descending score (a unit counts as its best token; ties keep the newer one) while they
// fit in `budget` tokens. REQUIRES: score has one entry per token of the units.
std::vector<bool> keep_units(const std::vector<Unit>& units, const std::vector<float>& score,
                             size_t budget, size_t sinks, size_t recent);

}  // namespace veloxquant
