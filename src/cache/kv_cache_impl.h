// KVCache's state and the pieces of it that the attention paths (attend_paths.cpp) and eviction
// (eviction.cpp) share.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "cache/cross_layer.h"
#include "cache/eviction/policy.h"
#include "codecs/fp16/fp16_codec.h"
#include "veloxquant/cache.h"

namespace veloxquant {

// Per-thread scratch of the attend paths; slots 4 and 5 are free for KVCache::attend.
float* attend_scratch(size_t slot, size_t n);
// Below this many appended or encoded elements per call, the work stays on the calling thread: a
// small model's decode step would spend more time waking threads than computing.
inline constexpr size_t kParallelAppendElements = size_t{1} << 14;
// The most attention scores (query rows x tokens) one head's call holds at once: past it the query
// rows are taken in chunks.
inline constexpr size_t kScoreFloats = size_t{1} << 24;

struct KVCache::Impl {
  Spec spec;
  LayerShape shape;
  LayerCodecs codecs;
  Fp16Codec fp16;
  std::vector<CacheStream> keys, values;  // one per KV head
  size_t tokens = 0;                      // appended so far (stored ones are fewer under eviction)
  // Stream tokens a sliding window (LayerShape::window) dropped from the front of every head,
  // outside eviction: stream token j of a cache without a policy is at position dropped + j.
  size_t dropped = 0;

  // Eviction (spec.eviction set). Every stored token of head h is, in cache order: the sinks,
  // then the stream's encoded tokens, then its fp16 tail; scores[h] follows that order.
  std::unique_ptr<EvictionPolicy> policy;
  std::vector<TokenScores> scores;
  // Attention sinks (streaming_llm): fp16 rows per head, keys before RoPE; `rope` and
  // `last_position` rotate them to just before the window at attend time.
  std::vector<std::vector<uint8_t>> sink_keys, sink_values;
  size_t sinks = 0;
  // Keys stored before RoPE (MethodInfo::keys_before_rope): every key of the streams, codes and
  // fp16 tail alike, is rotated by `rope` to its position (stream_position) when it is decoded
  // or scored, the same rotation the sinks get to theirs.
  bool pre_rope = false;
  RopeParams rope;
  int64_t last_position = -1;
  size_t pending = 0;      // tokens appended since the last evict()
  PromptStep prompt_step;  // the current step's place in a prompt cut into steps (continue_prompt)
  size_t held_peak = 0;    // the most held_bytes() has been (note_held)
  size_t held_bytes() const;
  // Raises held_peak to what the buffers hold now: after every append and every step's encoding
  // (eviction only gives memory back).
  void note_held() { held_peak = std::max(held_peak, held_bytes()); }
  // KVzip's reconstruction pass (record_attention_peaks): per head and stored token, the most
  // attention any observed query paid it while recording.
  bool recording_peaks = false;
  std::vector<std::vector<float>> peaks;
  size_t min_budget = 0;   // what the policy always keeps: a smaller budget could not be met

  // The codec head h's stream is stored with before any per-stream fit: its own under mixed
  // precision across heads (LayerCodecs::head_keys), else the layer's.
  const Codec& head_codec(bool is_key, size_t head) const {
    const auto& own = is_key ? codecs.head_keys : codecs.head_values;
    return own.empty() ? (is_key ? *codecs.key : *codecs.value) : *own[head];
  }
  // Codecs fitted per stream (Codec::fits_streams): one per KV head once the layer's first block
  // is encoded; empty before, and for codecs that are not fitted.
  std::vector<std::unique_ptr<Codec>> key_fitted, value_fitted;
  const Codec& key_codec(size_t head) const { return key_fitted.empty() ? head_codec(true, head) : *key_fitted[head]; }
  const Codec& value_codec(size_t head) const {
    return value_fitted.empty() ? head_codec(false, head) : *value_fitted[head];
  }

  // Saliency codecs (Codec::wants_attention) are encoded at the end of a step. Until then the
  // attention each fp16 tail token receives is summed per head: attention[h][t - attention_first]
  // over rows[h][...] query rows, for tokens t >= attention_first.
  bool salient = false;
  size_t attention_first = 0;
  std::vector<std::vector<float>> attention, attention_rows;

  // Blocks are encoded at the end of a step (finish_step) rather than on append: saliency codecs
  // wait for the step's attention, cross-layer specs for the other layer of their pair.
  bool held = false;

  // Cross-layer specs built by make_layer_caches(): the coordinator the model's layers share, and
  // this layer's pair (null outside pairs, and for a cache built alone). A pair encodes both
  // layers' blocks together (encode_pair_aged); each layer then reads its encoded tokens through
  // the pair's view (encoded()).
  std::shared_ptr<CrossLayerCoordinator> cross;
  const CrossLayerCoordinator::Pair* pair = nullptr;
  bool follower = false;
  // The other layer of the pair; null when it has not been built or is gone.
  Impl* partner() const;
  const PairCodec& pair_codec(bool is_key) const { return is_key ? *pair->codecs.key : *pair->codecs.value; }

  Impl(Spec s, const LayerShape& sh, std::shared_ptr<CrossLayerCoordinator> coordinator);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Tokens head h holds, sinks included.
  size_t stored(size_t head) const { return sinks + keys[head].encoded + keys[head].tail_tokens; }

  // Appends rows of one head (f32, [n, dim] with the given row stride) to the fp16 tail.
  void push(CacheStream& s, const float* rows, size_t n, size_t stride) const;
  // Encodes every full block of head h that has aged out of the residual window, fitting the
  // codecs first when they are fitted per stream and this is the layer's first block.
  void encode_aged(size_t head);
  void encode_all_aged();
  // Encodes, for both layers of the pair, the blocks that have aged out of the residual window in
  // both: the tokens the two layers hold in common.
  void encode_pair_aged();
  void fit_streams_if_due();
  // Query tokens of an attend_observed() call of nq whose attention is recorded (the last ones).
  size_t observed_queries(size_t nq) const;
  // Adds the attention of the queries of one attend_observed() call (mass: per head, one entry
  // per stored token) to what saliency codecs rank tokens by.
  void note_attention(const std::vector<std::vector<float>>& mass, size_t nq, size_t group);
  // Every byte the key (or value) streams hold: codes, fp16 tails, sinks, per-stream states, and
  // the shared state of each distinct codec the heads are stored with, counted once.
  size_t stream_bytes(bool is_key) const;
  // The encoded tokens of head h's keys (or values) as attention and decoding read them: a codec
  // and codes in its layout. A layer of a pair reads its pair's view, built in per-thread scratch
  // (one buffer for keys, one for values) and valid until the next view of that kind on the thread.
  struct Encoded {
    const Codec* codec;
    const uint8_t* codes;
  };
  Encoded encoded(size_t head, bool is_key) const;
  void decode_stream(const CacheStream& s, const Encoded& e, float* out) const;
  // Everything head h stores, [stored(h), dim] f32 each: the sinks rotated to their cache
  // positions, then the stream.
  void decode_head(size_t head, float* k, float* v) const;
  // One side of decode_head (keys or values), in `basis`'s own basis (Codec::decodes_in_basis)
  // when it is not null: its encoded tokens decoded there, the sinks and the fp16 tail rotated in.
  void decode_side(size_t head, bool keys_wanted, const Codec* basis, float* x) const;
  // The codec whose basis attend_decoded may work in for head h's keys or values, or null: it
  // must decode in a basis of its own, hold tokens, and (keys) the keys must not need RoPE.
  const Codec* prefill_basis(size_t head, bool keys_wanted) const;
  // The sinks' keys of head h rotated to their cache positions, [sinks, dim].
  void rotated_sink_keys(size_t head, float* k) const;
  // The position of stream token j of head h (cache order, after the sinks): its appended
  // position under eviction, else j.
  int64_t stream_position(size_t head, size_t j) const {
    return policy ? scores[head].position[sinks + j] : static_cast<int64_t>(dropped + j);
  }
  // The first stored token (cache order) that the query whose own token is stored token
  // visible - 1 may see: 0 without a window, else the first at a position inside its window.
  size_t window_start(size_t head, size_t visible) const;
  // Caps scores in place when the layer caps them (LayerShape::softcap).
  void cap_scores(float* s, size_t n) const;
  // Drops the encoded blocks at the front of every head that lie wholly before the window of
  // any later query; a no-op without a window and for a layer of a cross-layer pair, whose
  // partner reads the same blocks.
  void drop_outside_window();
  // Rotates head h's decoded stream keys ([encoded + tail, dim]) to their positions when the
  // cache stores keys before RoPE; else leaves them, already rotated.
  void rotate_stream_keys(size_t head, float* k) const;
  std::vector<float> decode_all(bool keys_wanted) const;

  // Attention for the `rows` query rows of one KV head; row r belongs to query token
  // first_token + r / group and sees cache tokens [0, stored - nq + first_token + r / group].
  // When `mass` is set, rows of query tokens >= observed_from add their probabilities to it
  // (one entry per stored token), or with `peak` keep the largest.
  struct Rows {
    const float* q;
    size_t rows, group, first_token, nq;
    float* mass;
    size_t observed_from;
    bool peak = false;
    bool observed(size_t r) const { return mass && first_token + r / group >= observed_from; }
    void note(size_t t, float p) const { mass[t] = peak ? std::max(mass[t], p) : mass[t] + p; }
  };
  // Where head h's key codec selects the tokens each query reads (Codec::select), the encoded
  // tokens a row does not read score kExcluded: p holds q.rows rows of `width` scores in cache
  // order (sinks, encoded, tail), and is written only there. In the fused path the codec's
  // score() writes them itself.
  void exclude_unselected(size_t head, const Rows& q, float* p, size_t width) const;
  // Fused: scores and weighted sums straight from the codes.
  void attend_fused(size_t head, const Rows& q, float* out) const;
  // Decoded: each head decoded once, then scores and outputs as matrix products, in chunks of
  // query rows within kScoreFloats.
  void attend_decoded(size_t head, const Rows& q, float* out) const;
  // Reference: decode everything to f32, then plain softmax attention.
  void attend_reference(size_t head, const Rows& q, float* out) const;

  // Drops what the policy ranks lowest until every head is within its budget.
  void evict();
};

}  // namespace veloxquant
