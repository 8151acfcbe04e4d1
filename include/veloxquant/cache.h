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
  std::vector<uint8_t> codes;  // the codec's bytes for `encoded` tokens
  size_t encoded = 0;
  std::vector<uint8_t> tail;   // fp16 rows of head_dim values, oldest first
  size_t tail_tokens = 0;
};

class KVCache {
 public:
  KVCache(std::string_view spec, const LayerShape& shape);
  KVCache(Spec spec, const LayerShape& shape);
  ~KVCache();
  KVCache(KVCache&&) noexcept;
  KVCache& operator=(KVCache&&) noexcept;

  // k, v: [tokens, kv_heads, head_dim], f32 / f16 / bf16, finite. Throws ShapeError otherwise.
  void append(const TensorView& k, const TensorView& v);
  // The runtime's append: keys before RoPE, one position per token, and the model's RoPE. The
  // cache decides where the rotation happens; methods that store post-RoPE keys (all of the
  // current ones) rotate before encoding, so queries given to attend() are rotated too.
  void append(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
              const RopeParams& rope);

  // q: [nq, q_heads, head_dim] with q_heads a multiple of kv_heads (grouped-query attention).
  // The nq queries belong to the last nq cached tokens: query i sees tokens
  // [0, tokens() - nq + i] (causal). out: [nq, q_heads, head_dim] f32. Scale 1/sqrt(head_dim).
  void attend(const TensorView& q, float* out, AttendPath path = AttendPath::Auto) const;

  size_t tokens() const;
  size_t kv_heads() const;
  size_t head_dim() const;
  // Exact stored bytes: codes, fp16 residual tokens and each stream's shared state.
  size_t key_bytes() const;
  size_t value_bytes() const;
  size_t bytes() const { return key_bytes() + value_bytes(); }
  // What an fp16 cache would store for the same tokens.
  size_t fp16_bytes() const;

  // Reconstruction of everything stored, [tokens, kv_heads, head_dim] f32.
  std::vector<float> decode_keys() const;
  std::vector<float> decode_values() const;

  const Spec& spec() const;
  const LayerShape& shape() const;

  // One stream per KV head, as stored.
  const std::vector<CacheStream>& key_streams() const;
  const std::vector<CacheStream>& value_streams() const;
  // Replaces everything stored by streams saved from a cache of the same spec and shape (session
  // files). Throws Error naming the first stream whose layout this cache's codecs could not have
  // produced (a stream per KV head, the same token count in every stream, code bytes matching
  // the codec, a tail within the residual window, finite fp16 tail values) or whose codes the
  // codec refuses (Codec::check_codes); the cache is unchanged then.
  void restore(std::vector<CacheStream> keys, std::vector<CacheStream> values);

 private:
  // Checks shapes and values, converts to f32, lets `transform_keys` rewrite the keys, stores.
  template <class Transform>
  void append_checked(const TensorView& k, const TensorView& v, Transform&& transform_keys);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant
