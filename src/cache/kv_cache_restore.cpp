// KVCache::restore(): streams from a session file, checked against what this cache's codecs and
// residual window could have stored before they replace its own.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string>

#include "cache/kv_cache_impl.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

// Why `s` cannot be a stream that `codec` with this residual window stored for `tokens` tokens;
// "" when it can. Mirrors what Impl::push leaves behind: whole blocks encoded, and a tail that
// holds the residual window plus less than one block (only the window before any block ages out).
// `block` and `code_bytes` (where a stream's codes end) are the codec's (a pair's, for a layer of
// a cross-layer pair); `variable_length` says the codes state their own block lengths.
std::string stream_layout_error(const CacheStream& s, size_t block,
                                const std::function<size_t(const CacheStream&)>& code_bytes,
                                bool variable_length, size_t residual, size_t tokens, size_t row_bytes) {
  if (s.encoded > tokens || s.tail_tokens != tokens - s.encoded) {
    return fmt::format("holds {} encoded + {} tail tokens; expected {} in all", s.encoded,
                       s.tail_tokens, tokens);
  }
  if (s.encoded % block != 0) {
    return fmt::format("has {} encoded tokens; expected a multiple of the codec's block of {}",
                       s.encoded, block);
  }
  // Where the codes of the encoded tokens end: for a variable-length codec the lengths its blocks
  // state, which must parse and lie within the codes.
  size_t code_end = 0;
  try {
    code_end = code_bytes(s);
  } catch (const Error& e) {
    return fmt::format("has {} code bytes for {} tokens, whose blocks do not parse: {}", s.codes.size(),
                       s.encoded, e.what());
  }
  if (s.codes.size() != code_end) {
    return fmt::format("has {} code bytes for {} tokens; expected {}{}", s.codes.size(), s.encoded,
                       code_end, variable_length ? " (where its blocks' stated lengths end)" : "");
  }
  if (s.tail.size() != s.tail_tokens * row_bytes) {
    return fmt::format("has {} tail bytes for {} tokens; expected {}", s.tail.size(),
                       s.tail_tokens, s.tail_tokens * row_bytes);
  }
  if (s.tail_tokens >= residual + block || (s.encoded > 0 && s.tail_tokens < residual)) {
    return fmt::format("keeps {} tokens in fp16 with {} encoded; a residual window of {} and "
                       "blocks of {} keep {}..{}", s.tail_tokens, s.encoded, residual, block,
                       s.encoded > 0 ? residual : 0, residual + block - 1);
  }
  for (size_t i = 0; i + 1 < s.tail.size(); i += 2) {
    if ((s.tail[i + 1] & 0x7C) == 0x7C) {  // exponent all ones: infinity or NaN
      return fmt::format("has a non-finite fp16 value at tail byte {}; expected finite values", i);
    }
  }
  return "";
}

bool any_encoded(const std::vector<CacheStream>& streams) {
  return std::any_of(streams.begin(), streams.end(), [](const CacheStream& s) { return s.encoded > 0; });
}

// A codec whose states come from the spec (Codec::states_from_spec) has them once any stream
// holds codes: a stream without its state (a GPU's download) gets the spec's, and a stream whose
// state is not the spec's is refused naming `what`.
void fill_spec_states(const Codec& prototype, std::vector<CacheStream>& streams, const std::string& what) {
  if (!prototype.fits_streams() || !prototype.states_from_spec() || !any_encoded(streams)) return;
  const std::vector<std::vector<uint8_t>> spec = prototype.fit_streams(nullptr, 0, streams.size());
  for (size_t head = 0; head < streams.size(); ++head) {
    std::vector<uint8_t>& state = streams[head].state;
    if (state.empty()) {
      state = spec[head];
    } else if (state != spec[head]) {
      throw Error(fmt::format("{}: KV head {} holds {} bytes of fitted state that are not the {} "
                              "its spec's artifact gives it; expected the artifact's tables",
                              what, head, state.size(), spec[head].size()));
    }
  }
}

// The codecs fitted to restored streams (Codec::with_states), one per stream; none when the
// streams hold no state (a codec that is not fitted, or one not fitted yet). Throws Error naming
// `what` when the states could not come from the codec.
std::vector<std::unique_ptr<Codec>> fitted_codecs(const Codec& prototype, std::vector<CacheStream>& streams,
                                                  const std::string& what) {
  fill_spec_states(prototype, streams, what);
  std::vector<std::vector<uint8_t>> states;
  size_t stored = 0;
  for (const CacheStream& s : streams) {
    states.push_back(s.state);
    stored += s.state.size();
  }
  std::vector<std::unique_ptr<Codec>> fitted;
  // A codec fitted per stream to states of no bytes (kvquant_nuq without its sink: the fit only
  // picks each KV head's tables) has its states, empty ones, once a stream holds codes.
  const bool empty_states = prototype.fits_streams() && prototype.stream_state_bytes() == 0 &&
                            any_encoded(streams);
  if (stored == 0 && !empty_states) return fitted;
  if (!prototype.fits_streams()) {
    throw Error(fmt::format("{} hold {} bytes of fitted state; expected none (the codec is not "
                            "fitted per stream)", what, stored));
  }
  try {
    for (size_t head = 0; head < streams.size(); ++head) fitted.push_back(prototype.with_states(states, head));
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
  return fitted;
}

}  // namespace

void KVCache::restore(std::vector<CacheStream> keys, std::vector<CacheStream> values) {
  Impl& m = *impl_;
  if (m.policy) {
    throw Error(m.spec.to_string() + ": session files do not hold an eviction policy's state (its "
                "token scores and sinks); caches that evict cannot be restored");
  }
  const size_t h = m.shape.kv_heads;
  if (keys.size() != h || values.size() != h) {
    throw Error(fmt::format("restore got {} key and {} value streams; expected {} of each (one per "
                            "KV head)", keys.size(), values.size(), h));
  }
  size_t tokens = 0;
  if (__builtin_add_overflow(keys[0].encoded, keys[0].tail_tokens, &tokens)) {
    throw Error(fmt::format("restore got a key stream of {} + {} tokens; the sum overflows",
                            keys[0].encoded, keys[0].tail_tokens));
  }
  const size_t row_bytes = m.fp16.code_bytes(1);
  std::vector<std::unique_ptr<Codec>> fitted[2];
  for (const char* kind : {"key", "value"}) {
    const bool is_key = kind[0] == 'k';
    std::vector<CacheStream>& streams = is_key ? keys : values;
    const Codec& prototype = is_key ? *m.codecs.key : *m.codecs.value;
    fitted[is_key ? 0 : 1] = fitted_codecs(prototype, streams, m.spec.to_string() + ": the " + kind + " streams");
    // A layer of a pair stores the pair's layout (the leader's part or the follower's).
    const PairCodec* paired = m.pair ? &m.pair_codec(is_key) : nullptr;
    const size_t block = paired ? paired->block_tokens() : prototype.block_tokens();
    const bool variable_length = !paired && prototype.variable_length();
    for (size_t head = 0; head < h; ++head) {
      const Codec& stored = m.head_codec(is_key, head);  // the layer's codec but under mixed precision
      const std::function<size_t(const CacheStream&)> code_bytes = [&](const CacheStream& s) {
        if (paired) return m.follower ? paired->follower_bytes(s.encoded) : paired->leader_bytes(s.encoded);
        if (variable_length) return stored.encoded_bytes(s.codes.data(), s.encoded, s.codes.size());
        return stored.code_bytes(s.encoded);
      };
      const std::string why = stream_layout_error(streams[head], block, code_bytes, variable_length,
                                                  m.codecs.residual, tokens, row_bytes);
      if (!why.empty()) {
        throw Error(fmt::format("{}: the {} stream of KV head {} {}", m.spec.to_string(), kind, head, why));
      }
      const std::vector<std::unique_ptr<Codec>>& own = fitted[is_key ? 0 : 1];
      if (prototype.fits_streams() && own.empty() && streams[head].encoded > 0) {
        throw Error(fmt::format("{}: the {} stream of KV head {} has {} encoded tokens but no "
                                "fitted state; expected the state its codes were encoded with",
                                m.spec.to_string(), kind, head, streams[head].encoded));
      }
      // Restored codes come from outside the process: checked once here, so that attention
      // never meets codes encode() cannot have written (Codec::check_codes).
      try {
        if (paired) paired->check_codes(m.follower, streams[head].codes.data(), streams[head].encoded);
        else (own.empty() ? stored : *own[head]).check_codes(streams[head].codes.data(), streams[head].encoded);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: the {} stream of KV head {}: {}", m.spec.to_string(), kind, head, e.what()));
      }
    }
  }
  // The other layer of a pair, once it holds tokens, must hold the same ones: a follower reads the
  // codes its leader stores for the same blocks.
  if (const Impl* other = m.partner(); other != nullptr && other->tokens > 0) {
    const int here = m.shape.layer, there = other->shape.layer;
    if (other->tokens != tokens) {
      throw Error(fmt::format("{}: layers {} and {} are a pair; layer {} holds {} tokens and the "
                              "restored layer {} {}; expected the same", m.spec.to_string(),
                              std::min(here, there), std::max(here, there), there, other->tokens, here, tokens));
    }
    for (size_t head = 0; head < h; ++head) {
      if (other->keys[head].encoded != keys[head].encoded || other->values[head].encoded != values[head].encoded) {
        throw Error(fmt::format("{}: layers {} and {} are a pair; in KV head {} layer {} has encoded "
                                "{} key and {} value tokens and the restored layer {} {} and {}; "
                                "expected the same", m.spec.to_string(), std::min(here, there),
                                std::max(here, there), head, there, other->keys[head].encoded,
                                other->values[head].encoded, here, keys[head].encoded, values[head].encoded));
      }
    }
  }
  m.keys = std::move(keys);
  m.values = std::move(values);
  m.key_fitted = std::move(fitted[0]);
  m.value_fitted = std::move(fitted[1]);
  m.tokens = tokens;
  if (m.salient) {  // attention seen before the save is not in the file: held blocks get none
    m.attention_first = std::min(m.keys[0].encoded, m.values[0].encoded);
    for (size_t head = 0; head < h; ++head) {
      m.attention_first = std::min({m.attention_first, m.keys[head].encoded, m.values[head].encoded});
    }
    for (size_t head = 0; head < h; ++head) {
      m.attention[head].assign(tokens - m.attention_first, 0.0f);
      m.attention_rows[head].assign(tokens - m.attention_first, 0.0f);
    }
  }
}

}  // namespace veloxquant
