// A compressed KV cache for one attention layer: append keys/values, attend for queries.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/method.h"
#include "veloxquant/tensor.h"

namespace veloxquant {

enum class AttendPath {
  Fused,      // scores and value sums straight from codes where the codec allows
  Reference,  // decode everything to f32, then plain softmax attention
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

  // q: [nq, q_heads, head_dim] with q_heads a multiple of kv_heads (grouped-query attention).
  // The nq queries belong to the last nq cached tokens: query i sees tokens
  // [0, tokens() - nq + i] (causal). out: [nq, q_heads, head_dim] f32. Scale 1/sqrt(head_dim).
  void attend(const TensorView& q, float* out, AttendPath path = AttendPath::Fused) const;

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant
