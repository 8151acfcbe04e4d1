// Observing what the KV caches of a running model do, per layer and KV head: how far the
// decoded keys and values are from what the model handed the cache, how far the cache's
// attention output is from exact fp32 attention over every token the model produced, where the
// time goes (encoding on append, attending), the bytes stored, the keys' norms and how much
// attention the first tokens (the attention sinks) draw. A Session reports to an observer only
// when one is attached (Session::set_observer), so an unobserved run pays nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/rope.h"

namespace veloxquant {

struct HeadObservation {
  size_t layer = 0, kv_head = 0;
  // Relative L2 error of the cache's decoded keys (after RoPE, as it stores them) and values
  // against the exact inputs, over the tokens the head still holds; NaN when the cache cannot
  // decode its layer as one tensor (heads of an evicting cache holding different token counts).
  double key_error = 0, value_error = 0;
  // Relative L2 error of the attention output of this head's query heads against exact fp32
  // attention over every token appended so far, accumulated over all observed steps.
  double attention_error = 0;
  double key_norm_mean = 0, key_norm_max = 0;  // L2 norms of the exact keys
  // Mean share of exact attention probability on the first `sink_tokens` positions, over every
  // query of every step that saw more than sink_tokens tokens.
  double sink_mass = 0;
  size_t stored_tokens = 0;
};

struct LayerObservation {
  size_t layer = 0;
  size_t key_bytes = 0, value_bytes = 0, fp16_bytes = 0;
  double encode_seconds = 0;  // in KVCache::append (conversion, RoPE, encoding)
  double attend_seconds = 0;  // in KVCache::attend_observed
  std::vector<HeadObservation> heads;
};

class CacheObserver {
 public:
  // One observer per session; `rope` rotates the exact keys as the model's caches do.
  CacheObserver(size_t layers, size_t kv_heads, size_t q_heads, size_t head_dim, RopeParams rope,
                size_t sink_tokens = 4);

  // The runtime's report of one layer's forward step: n tokens' pre-RoPE keys and values
  // [n, kv_heads, head_dim], their positions, the rotated queries [n, q_heads, head_dim] and the
  // cache's attention output for them, and the time append and attend took.
  void record(size_t layer, size_t n, const float* keys, const float* values, std::span<const int64_t> positions,
              const float* queries, const float* output, double encode_seconds, double attend_seconds);
  // Forgets every token (Session::reset).
  void reset();

  // Everything observed so far, with reconstruction errors and bytes read from `caches` (the
  // session's caches, one per layer). Throws Error when their count or shapes differ from the
  // observer's.
  std::vector<LayerObservation> report(std::span<const KVCache> caches) const;

 private:
  struct Layer {
    std::vector<float> keys, values;  // exact, keys rotated, [tokens, kv_heads, head_dim]
    std::vector<double> err_sq, ref_sq, sink_sum, norm_sum, norm_max;  // per KV head
    std::vector<size_t> sink_queries;
    double encode_seconds = 0, attend_seconds = 0;
  };
  size_t kv_heads_, q_heads_, head_dim_, sink_tokens_;
  RopeParams rope_;
  std::vector<Layer> layers_;
};

// The observations as JSON: {"layers": [{layer, bytes, times, "heads": [...]}]}.
std::string observations_json(const std::vector<LayerObservation>& layers);

}  // namespace veloxquant
