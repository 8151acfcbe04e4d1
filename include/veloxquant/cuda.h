// The CUDA backend (built with -DVELOXQUANT_CUDA=ON, sm_90): a compressed KV cache for one
// attention layer that lives in GPU memory, for a batch of sequences of equal length.
//  - append(): quantize-on-append, one launch per layer step. Keys get RoPE first; the codes are
//    byte for byte the CPU codecs' (KIVI, TurboQuant-MSE; TurboQuant-prod and QJL but for the
//    rare sign of a sketch product within rounding of zero), so caches move between backends.
//  - attend(): fused decode attention straight from the codes, split along the sequence
//    (flash-decoding), then one reduction launch.
// Layout, kernels and parity bounds: docs/cuda.md. This header needs no CUDA headers: device
// pointers are plain pointers, f16 data is uint16_t, streams are cudaStream_t passed as void*.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "veloxquant/rope.h"

namespace veloxquant {
struct LayerShape;  // veloxquant/method.h
struct Spec;
}

namespace veloxquant::cuda {

// A family's tables in a CacheConfig: what its CPU form derives from the layer's seed (TurboQuant's
// rotation signs and codebooks, QJL's sketch), so this library needs nothing but the CUDA toolkit.
// Each family defines its own beside its kernels (src/cuda/<family>/) and reads it back by type.
struct FormatTables {
  virtual ~FormatTables() = default;
};

struct CacheConfig {
  // The device format holding the codes: a name a family registers (src/cuda/<family>/), as the
  // method's CUDA form (MethodInfo::cuda_config) names it: fp16, kivi, turboquant_mse, ...
  std::string format = "fp16";
  size_t batch = 1;
  size_t kv_heads = 1;
  size_t head_dim = 128;   // 64, 80, 96, 128 or 256 (the formats' own rules may take fewer)
  size_t capacity = 0;     // most tokens one sequence may hold
  unsigned bits = 2;       // the format's code bits (KIVI, TurboQuant: keys and values; QJL: values)
  size_t group = 32;       // windowed formats: tokens per key block, a multiple of 32 (KIVI: also
                           // channels per value group; QJL: tokens sharing outlier channels)
  size_t residual = 0;     // windowed formats: newest tokens kept in fp16
  RopeParams rope;         // applied to keys on append (sinks: at attend); dims 0: none. Interleaved only.
  // The method stores keys before RoPE (MethodInfo::keys_before_rope): they are appended as the
  // model makes them, and `rope` turns token i to position i whenever they are read.
  bool keys_before_rope = false;
  // The layer's attention beyond causal softmax (LayerShape's): a query sees only its newest
  // `window` tokens (0: every token), and scores are soft-capped at `softcap` (0: none).
  size_t window = 0;
  float softcap = 0.0f;
  // A windowed layer's largest append (0: not bounded). When set, the codes no later query can
  // see are overwritten: the layer holds codes of about window + max_append tokens, not capacity.
  size_t max_append = 0;
  // Tokens the format's codes hold together in both streams (KIVI and QJL: the key group, a
  // multiple of the values' 4 tokens; 1 where every token is encoded alone): an evicting cache
  // drops whole units of it.
  size_t block = 1;
  // streaming_llm's eviction (budget > 0): the first `sinks` tokens are kept as fp16 rows before
  // RoPE and turned at every attend to sit just before the rest, and at every finish_step() the
  // oldest other tokens leave until at most `budget` tokens remain, whole blocks at a time, as
  // KVCache with "streaming_llm:budget=B,sinks=S+..." keeps them. With max_append set, the codes
  // then hold about budget + max_append tokens, not capacity.
  size_t sinks = 0;
  size_t budget = 0;
  std::shared_ptr<const FormatTables> tables;  // the format's own; null when it has none
};

// One (sequence, KV head) stream laid out exactly as the CPU cache's CacheStream: encoded codes,
// then the fp16 rows of the residual window, oldest first, and the state the codec fitted to the
// stream's tokens (kvquant_nuq's first token; empty for a format that keeps none).
struct HostStream {
  std::vector<uint8_t> codes;
  size_t encoded = 0;
  std::vector<uint8_t> tail;
  size_t tail_tokens = 0;
  std::vector<uint8_t> state;
};

// A layer's streams in the CPU layout: keys and values of stream b * kv_heads + h.
struct LayerStreams {
  std::vector<HostStream> keys, values;
};

// Whether the CUDA backend holds `spec` for a layer of `shape`: the one answer that the runtime,
// the CLI, the Python package and the parity test ask. reason names the setting it does not run
// (a CPU-only method, unequal bit widths, an eviction policy, a head_dim) and what it expects.
struct Support {
  std::string reason;  // empty: supported
  explicit operator bool() const { return reason.empty(); }
};
Support supports(const Spec& spec, const LayerShape& shape);

// The configuration under which a DeviceCache stores what KVCache(spec, shape) stores, byte for
// byte, from the method's CUDA form (MethodInfo::cuda_config, in its codecs folder) with what its
// CPU codecs derive from shape.layer and shape.seed (TurboQuant's rotation signs, codebooks and
// sketch, QJL's sketch). Keys are taken as given (rope.dims 0), like KVCache::append(k, v).
// Defined in the CPU library, so it is there without the CUDA backend. Throws SpecError with
// supports()'s reason when the backend cannot hold it.
CacheConfig device_cache_config(const Spec& spec, const LayerShape& shape, size_t batch, size_t capacity);

class DeviceCache {
 public:
  // Throws veloxquant::Error naming the setting when the configuration is not supported.
  explicit DeviceCache(const CacheConfig& config);
  ~DeviceCache();
  DeviceCache(const DeviceCache&) = delete;
  DeviceCache& operator=(const DeviceCache&) = delete;

  // k, v: device fp16 [batch, kv_heads, n, head_dim]; positions: device int64 [batch, n].
  // One kernel launch. Throws Error if the tokens held would pass capacity (an evicting cache whose
  // codes wrap, CacheConfig::max_append, goes on past it: it holds its budget and a step).
  void append(const uint16_t* k, const uint16_t* v, const int64_t* positions, size_t n,
              void* stream = nullptr);
  // One decode query per sequence: q device fp16 [batch, q_heads, head_dim] (q_heads a multiple
  // of kv_heads, at most 8 per KV head, post-RoPE); out device f32 [batch, q_heads, head_dim].
  // Softmax scale 1/sqrt(head_dim), then the configuration's window and soft cap. Two launches: the split
  // pass and the reduction.
  void attend(const uint16_t* q, size_t q_heads, float* out, void* stream = nullptr);
  // A prompt's queries, as KVCache::attend takes them, for every sequence: q device fp16
  // [nq, batch, q_heads, head_dim] for the newest nq tokens held, query i of each sequence seeing
  // its tokens [0, tokens() - nq + i] (causal); out device f32 [nq, batch, q_heads, head_dim].
  // Two launches, as attend(); nq 1 is attend().
  void attend_causal(const uint16_t* q, size_t nq, size_t q_heads, float* out, void* stream = nullptr);
  // The end of a forward step, after its queries have attended (KVCache::finish_step): an evicting
  // cache (budget > 0) drops its oldest tokens past the budget. No launch; nothing without a budget.
  void finish_step();

  // Tokens taken since the cache was made (sinks and evicted ones included), and tokens held now
  // (an evicting cache's sinks and kept tokens; tokens() otherwise).
  size_t tokens() const;
  size_t held_tokens() const;
  const CacheConfig& config() const;
  // Bytes a sequence-set of this many tokens stores, counted like KVCache::bytes(): codes, the
  // fp16 residual rows and, once per stream, the shared state (signs, codebooks).
  size_t stored_bytes() const;
  // Its two parts, as KVCache::key_bytes() and value_bytes() split them.
  size_t stored_key_bytes() const;
  size_t stored_value_bytes() const;
  // Bytes one attend() reads from the cache (codes, scales, residual rows; not the query).
  size_t attend_read_bytes() const;

  // Copies of one stream in the CPU layout (parity with KVCache::key_streams(): an evicting
  // cache's kept tokens, without its sinks). Synchronous. Throws Error once a window has
  // overwritten codes (CacheConfig::max_append).
  HostStream download_keys(size_t batch, size_t kv_head) const;
  HostStream download_values(size_t batch, size_t kv_head) const;
  // Replaces what the cache holds by `tokens` tokens of every sequence in the CPU layout, as the
  // downloads give them (a saved session's caches): keys[b * kv_heads + h], values likewise.
  // An evicting cache takes none (as on the CPU, its sessions are not saved).
  // Everything is checked before anything changes; throws Error naming the stream and the count
  // or size that disagrees with this configuration. Synchronous.
  void upload(size_t tokens, std::span<const HostStream> keys, std::span<const HostStream> values);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant::cuda
