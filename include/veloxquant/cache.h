// A compressed KV cache for one attention layer: append keys/values, attend for queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/method.h"
#include "veloxquant/rope.h"
#include "veloxquant/tensor.h"

namespace veloxquant {

class CrossLayerCoordinator;  // src/cache/cross_layer.h

enum class AttendPath {
  // Fused for a few queries per head (decoding: memory-bound, so the codes are read once and
  // never expanded), Decoded for many (prefill: compute-bound, so one decode pays for itself).
  Auto,
  Fused,      // scores and value sums straight from codes where the codec allows
  Decoded,    // decode each head once to f32, then matrix-matrix products (BLAS)
  Reference,  // decode everything to f32, then plain scalar softmax attention
};

// What a cache stores for the keys (or the values) of one KV head: the encoded blocks, then the
// newest tokens in fp16 that have not aged out of the method's residual window yet. Session files
// save and restore these bytes as they are.
struct CacheStream {
  std::vector<uint8_t> state;  // what a codec fitted to this stream keeps (Codec::fit_streams)
  std::vector<uint8_t> codes;  // the codec's bytes for `encoded` tokens
  size_t encoded = 0;
  std::vector<uint8_t> tail;  // fp16 rows of head_dim values, oldest first
  size_t tail_tokens = 0;
};

class KVCache {
 public:
  // One layer alone. A cross-layer spec (minicache, xquant) has no partner layer here and stores
  // its layer with the method's base quantizer; make_layer_caches() builds a model's layers with
  // their pairs.
  KVCache(std::string_view spec, const LayerShape& shape);
  KVCache(Spec spec, const LayerShape& shape);
  ~KVCache();
  KVCache(KVCache&&) noexcept;
  KVCache& operator=(KVCache&&) noexcept;

  // k, v: [tokens, kv_heads, head_dim], f32 / f16 / bf16, finite. Throws ShapeError otherwise.
  void append(const TensorView& k, const TensorView& v);
  // The runtime's append: keys before RoPE, one position per token, and the model's RoPE. The
  // cache decides where the rotation happens: keys are rotated before encoding, so queries given
  // to attend() are rotated too; streaming_llm's sinks alone are kept unrotated and rotated to
  // their cache positions at attend time.
  void append(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
              const RopeParams& rope);

  // q: [nq, q_heads, head_dim] with q_heads a multiple of kv_heads (grouped-query attention).
  // The nq queries belong to the last nq cached tokens: query i sees tokens
  // [0, tokens() - nq + i] (causal). out: [nq, q_heads, head_dim] f32. Scale 1/sqrt(head_dim).
  void attend(const TensorView& q, float* out, AttendPath path = AttendPath::Auto) const;

  // Token eviction (a spec "policy:...+quantizer:..."). The runtime attends through
  // attend_observed(), which also hands the policy the attention the queries paid to each stored
  // token, and calls evict() at the end of every forward step. Query i of attend() then sees the
  // tokens its KV head still holds up to its own; each head may hold a different number.
  void attend_observed(const TensorView& q, float* out);
  // Drops the tokens the policy ranks lowest until every KV head is within its budget (SnapKV
  // and its relatives only after a prompt: a step of more than one token, or the last step of a
  // prompt cut by continue_prompt()). No-op without a policy.
  void evict();
  // The end of a forward step, after every query of the step has attended: encodes the blocks a
  // saliency codec (Codec::wants_attention) or a cross-layer spec held back, then evict(). The
  // runtime calls it once per step on every layer, in order; append() also encodes held blocks
  // first, so a cache used without it stays correct, only without the attention of the last step.
  // A layer of a cross-layer pair encodes the blocks both layers of the pair hold, for both.
  void finish_step();
  // The step about to run (append, attend_observed, finish_step) is part of a prompt evaluated in
  // several steps, with `rest` of its tokens in the steps after it (0: this step ends it). The
  // runtime says so before each step of a prompt it cuts into micro-batches, so that SnapKV and
  // its relatives select once, after the whole prompt, from the attention of its last `window`
  // queries, however the steps cut them; the cache holds the whole prompt until then. Without it
  // a step of several tokens is a whole prompt. finish_step() ends what it says.
  void continue_prompt(size_t rest);
  bool evicts() const;
  // KVzip (a policy that scores by a reconstruction pass the session runs): whether the policy
  // wants such scores, and handing them over: per KV head one score per position, and the tokens
  // each head keeps (empty: the budget each).
  bool scores_by_reconstruction() const;
  void set_reconstruction_scores(std::vector<std::vector<float>> by_position,
                                 std::vector<size_t> head_budgets);
  // While on, every attend_observed() records per KV head and stored token the most attention any
  // query (of any of the head's query heads) paid it; attention_peaks() returns them in cache
  // order, one row per KV head. Turning it on clears them. Throws Error on a cache that evicts or
  // ranks tokens by attention (saliency codecs).
  void record_attention_peaks(bool on);
  const std::vector<std::vector<float>>& attention_peaks() const;
  // The layer's budget in tokens per KV head (0 without a policy). squeeze's budgets come from
  // measured layer importance: the runtime measures it when wants_layer_importance() and sets
  // them; a budget below what the policy always keeps is raised to that.
  size_t budget() const;
  void set_budget(size_t tokens);
  bool wants_layer_importance() const;
  // Tokens KV head `head` holds now, and their positions in the sequence, in cache order.
  size_t stored_tokens(size_t head) const;
  std::vector<int64_t> positions(size_t head) const;

  // Tokens appended so far (those evicted included).
  size_t tokens() const;
  size_t kv_heads() const;
  size_t head_dim() const;
  // Exact stored bytes: codes, fp16 residual tokens, sinks and each stream's shared state.
  size_t key_bytes() const;
  size_t value_bytes() const;
  size_t bytes() const { return key_bytes() + value_bytes(); }
  // What an fp16 cache would store for every token appended.
  size_t fp16_bytes() const;
  // What the cache's buffers take from the allocator now (their capacity: codes, fp16 rows,
  // sinks, per-stream states, eviction scores, saliency sums), and the most they have taken since
  // the cache was made: what a cache costs in memory, beyond the bytes() it stores. A layer of a
  // cross-layer pair counts its own buffers, not the codes its pair shares.
  size_t held_bytes() const;
  size_t peak_held_bytes() const;

  // Reconstruction of everything stored, [stored, kv_heads, head_dim] f32. Throws Error when the
  // heads hold different numbers of tokens.
  std::vector<float> decode_keys() const;
  std::vector<float> decode_values() const;

  const Spec& spec() const;
  const LayerShape& shape() const;

  // True when make_layer_caches() built this cache with the other layers of a cross-layer spec:
  // what it stores depends on its partner's, so it is saved and restored with all of them.
  bool cross_layer() const;

  // One stream per KV head, as stored.
  const std::vector<CacheStream>& key_streams() const;
  const std::vector<CacheStream>& value_streams() const;
  // True when every fitted state the streams hold follows from the spec alone
  // (Codec::states_from_spec): a device that keeps the spec's tables may drop them on upload.
  bool states_from_spec() const;
  // Replaces everything stored by streams saved from a cache of the same spec and shape (session
  // files). Throws Error naming the first stream whose layout this cache's codecs could not have
  // produced (a stream per KV head, the same token count in every stream, code bytes matching
  // the codec, a tail within the residual window, finite fp16 tail values) or whose codes the
  // codec refuses (Codec::check_codes), or when the cache evicts (session files do not hold a
  // policy's state); the cache is unchanged then. Where the codec's states come from the spec
  // (Codec::states_from_spec), a stream without one gets the spec's, and any other is refused. A layer of a
  // cross-layer pair whose partner already holds tokens is also refused when the two disagree on tokens or
  // encoded blocks.
  void restore(std::vector<CacheStream> keys, std::vector<CacheStream> values);

 private:
  friend class CrossLayerCoordinator;
  friend std::vector<KVCache> make_layer_caches(const Spec& spec, std::vector<LayerShape> shapes);
  KVCache(Spec spec, const LayerShape& shape, std::shared_ptr<CrossLayerCoordinator> cross);

  // Checks shapes and values, converts to f32, rotates keys by their positions when `rope` is
  // given (except the policy's sinks), stores.
  void append_checked(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
                      const RopeParams* rope);
  // attend(), adding the observed queries' attention probabilities into `mass` when given.
  void attend_into(const TensorView& q, float* out, AttendPath path, std::vector<std::vector<float>>* mass,
                   bool peak = false) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The caches of a model's `layers` layers, all of one spec: layer l gets `shape` with layer = l
// and layers = `layers`. For a cross-layer spec (minicache, xquant) they share one
// CrossLayerCoordinator, which stores adjacent layers in pairs. The runtime, session files and
// tools build a model's caches here. Throws SpecError when layers < 1.
std::vector<KVCache> make_layer_caches(const Spec& spec, const LayerShape& shape, int layers);
// The same with a shape per layer (a model whose layers attend differently: sliding windows,
// their own RoPE, their own head sizes); a cross-layer spec's shapes must all have the same KV
// heads and head_dim (SpecError otherwise).
std::vector<KVCache> make_layer_caches(const Spec& spec, std::vector<LayerShape> shapes);

}  // namespace veloxquant
