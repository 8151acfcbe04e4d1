// The forward pass of the runtime's architectures on the GPU (built with -DVELOXQUANT_CUDA=ON,
// sm_90): weights in GPU memory as fp16 or f32, cuBLAS for the projections, kernels of our own
// for the small operations (embedding rows, RMSNorm, RoPE, SwiGLU or GeGLU, soft caps, residual
// adds), and one DeviceCache per layer, whose fused kernels run attention on the compressed cache.
// The CPU library's Session drives it when SessionOptions::device is Device::Cuda
// (veloxquant/model.h). No CUDA headers needed here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "veloxquant/cuda.h"
#include "veloxquant/rope.h"
#include "veloxquant/sampler.h"

namespace veloxquant::cuda {

// The precision of the weights and of the projections' inputs. F16 halves the weights' memory
// and bandwidth; F32 computes as the CPU runtime does (f32 activations, weights decoded to f32),
// so that quantized caches see the same keys up to summation order (docs/cuda.md has both's
// agreement with the CPU).
enum class Precision { F16, F32 };

struct DecoderShape {
  size_t layers = 0, embedding = 0, feed_forward = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  float rms_eps = 1e-5f;
  // Per layer: the RoPE applied to its queries and keys before the cache sees them (a windowed
  // layer may rotate with its own base), magnitude included (YaRN's attention factor).
  std::vector<RopeParams> ropes;
  Precision precision = Precision::F16;
  // How the block differs from llama's (the runtime's ModelConfig says which architecture has
  // what): per-head RMSNorm of q and k before RoPE, norms of the attention and feed-forward
  // outputs before their residual adds, GELU (tanh) instead of SiLU in the gated feed-forward,
  // token embeddings times embedding_scale, final logits soft-capped (0: not).
  bool qk_norm = false, post_norms = false, gelu = false;
  float embedding_scale = 1.0f, final_softcap = 0.0f;
  // Queries times query_scale after RoPE (a model's own attention scale times sqrt(head_dim)),
  // and, with temperature_scale > 0, times 1 + temperature_scale * log(floor(pos /
  // temperature_floor) + 1) (mistral3's attention temperature by position).
  float query_scale = 1.0f, temperature_scale = 0.0f;
  int64_t temperature_floor = 1;
};

// A weight matrix [rows = output features, cols = input features] row-major, as GGUF stores it,
// as the bytes of its values in the decoder's precision (fp16 or f32).
using HostMatrix = std::vector<uint8_t>;

struct DecoderLayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_norm, k_norm;                 // [head_dim] each with qk_norm, else empty
  std::vector<float> post_attn_norm, post_ffn_norm;  // [embedding] each with post_norms, else empty
  HostMatrix wq, wk, wv, wo, gate, up, down;
  std::vector<float> bq, bk, bv;  // empty without q/k/v biases
};

struct DecoderWeights {
  HostMatrix token_embd;  // [vocab, embedding]
  HostMatrix output;      // [vocab, embedding]; empty: tied to token_embd
  std::vector<float> output_norm;
  std::vector<DecoderLayerWeights> layers;
};

class DeviceDecoder {
 public:
  // caches: one configuration per layer (rope.dims 0: keys arrive rotated; a windowed or
  // soft-capped layer's window and cap), each holding at
  // least the context, all of the same batch: that many sequences are decoded in lockstep, each
  // with its own cache, all of the same length. max_step: most tokens of each sequence one step()
  // takes. Throws Error naming a weight whose size disagrees with the shape, and for what
  // DeviceCache refuses.
  DeviceDecoder(const DecoderShape& shape, const DecoderWeights& weights,
                std::vector<CacheConfig> caches, size_t max_step);
  ~DeviceDecoder();
  DeviceDecoder(const DeviceDecoder&) = delete;
  DeviceDecoder& operator=(const DeviceDecoder&) = delete;

  // Runs n tokens (1..max_step) of every sequence at positions [tokens(), tokens() + n), appending
  // their keys and values to every layer's cache; the prompt's queries attend causally on the
  // compressed cache, as KVCache::attend does. tokens: host [batch, n] (sequence b's n tokens
  // from tokens[b * n]). Writes the logits of tokens [first_logit, n) of each sequence to
  // `logits` (host [batch, n - first_logit, vocab] floats; none when first_logit >= n). The
  // sequences share every weight read and every launch: a decode step of batch B reads the
  // weights once for B tokens. logits null: the logits stay in GPU memory for sample().
  void step(const int32_t* tokens, size_t n, size_t first_logit, float* logits);
  // The next token of each sequence, picked on the GPU (cuda::DeviceSampler) from the logits of
  // its last token in the last step, one request per sequence; only the ids reach the host.
  // Throws Error when that step computed no logits or the requests are not one per sequence.
  std::vector<int32_t> sample(std::span<const SampleRequest> requests);

  // Tokens each sequence holds.
  size_t tokens() const;
  size_t batch() const;
  // Exact bytes all layers' caches store for every sequence (DeviceCache::stored_key_bytes,
  // stored_value_bytes).
  size_t key_bytes() const;
  size_t value_bytes() const;
  // Device bytes of the weights.
  size_t weight_bytes() const;
  // Empties every cache.
  void reset();
  // Layer l's cache, whose streams a saved session downloads (DeviceCache::download_keys).
  const DeviceCache& cache(size_t layer) const;
  // Replaces every layer's caches by `tokens` tokens of every sequence (layers[l]: as
  // DeviceCache::upload takes them), so the next step() continues at position `tokens`. Throws
  // Error naming the layer that disagrees; the caches are empty then.
  void restore(size_t tokens, std::span<const LayerStreams> layers);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant::cuda
