// Llama-family models from GGUF files, and inference sessions whose attention runs through
// compressed KV caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/gguf.h"
#include "veloxquant/rope.h"
#include "veloxquant/sampler.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {

class CacheObserver;  // veloxquant/observer.h

// The gated feed-forward's nonlinearity on its gate: SwiGLU's SiLU, GeGLU's tanh-approximated GELU.
enum class Activation : uint8_t { Silu, GeluTanh };

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", ...
  std::string name;          // general.name, may be empty
  uint32_t layers = 0;
  uint32_t embedding = 0;  // model width
  // Every layer's shape, or where they differ by layer (gemma4) the full-attention layers' as the
  // file's keys name them; the *_of(layer) accessors give each layer's own.
  uint32_t feed_forward = 0;  // gated feed-forward hidden width
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t vocab = 0;
  uint32_t context_length = 0;  // the context the model was trained for
  float rms_eps = 1e-5f;
  RopeParams rope;
  bool qkv_bias = false;     // q/k/v projections carry biases (qwen2)
  bool tied_output = false;  // output projection reuses token_embd

  // What the block does beyond llama's (qwen3, gemma2/3, phi3, mistral3); the defaults are llama.
  Activation activation = Activation::Silu;
  bool qk_norm = false;            // per-head RMSNorm of q and k before RoPE (qwen3, gemma3)
  bool post_norms = false;         // RMSNorm of the attention and feed-forward outputs before each
                                   // residual add (gemma2/3)
  float embedding_scale = 1.0f;    // token embeddings are multiplied by it (gemma: sqrt(width))
  float attention_scale = 0.0f;    // scores are q.k times it; 0: 1 / sqrt(head_dim)
  float attention_softcap = 0.0f;  // scores become cap * tanh(score / cap); 0: not capped
  float final_softcap = 0.0f;      // the same for the output logits
  // Sliding-window attention: the layers marked here see only the last `sliding_window` tokens
  // and rotate with `sliding_rope` (gemma3's local base); empty: every layer sees all tokens.
  uint32_t sliding_window = 0;
  std::vector<bool> sliding_layers;
  RopeParams sliding_rope;
  // Query temperature by position (mistral3): q *= 1 + scale * log(1 + floor(pos / floor));
  // scale 0: none.
  float attention_temperature_scale = 0.0f;
  uint32_t attention_temperature_floor = 0;

  // Shapes per layer where they differ (gemma4's windowed layers have smaller heads, and its
  // files may give KV heads and feed-forward widths per layer); empty: the uniform fields hold.
  std::vector<uint32_t> layer_kv_heads, layer_head_dim, layer_feed_forward;
  // The last shared_kv_layers layers project no keys or values: each attends through the cache
  // of the earlier layer kv_layer() names (gemma4).
  uint32_t shared_kv_layers = 0;
  bool value_norm = false;           // values RMS-normalized per head, without a weight (gemma4)
  uint32_t per_layer_embedding = 0;  // width of each layer's own token input (gemma4 E2B/E4B); 0: none

  bool sliding(size_t layer) const { return layer < sliding_layers.size() && sliding_layers[layer]; }
  const RopeParams& layer_rope(size_t layer) const { return sliding(layer) ? sliding_rope : rope; }
  uint32_t kv_heads_of(size_t layer) const;
  uint32_t head_dim_of(size_t layer) const;
  uint32_t feed_forward_of(size_t layer) const;
  // Whether every layer has the same attention and feed-forward shape and its own keys and values.
  bool uniform_layers() const;
  // Layers that store keys and values: the first cache_layers(); one KVCache each.
  uint32_t cache_layers() const { return layers - shared_kv_layers; }
  // The layer whose cache `layer` attends through: itself, or for a shared-KV layer the last
  // earlier one of its kind (windowed or global), as llama.cpp maps them.
  size_t kv_layer(size_t layer) const;
};

// The shape of each cache-storing layer's KVCache (KV heads, head_dim, RoPE, window, soft-cap),
// cache_layers() of them, for make_layer_caches.
std::vector<LayerShape> cache_shapes(const ModelConfig& c);

// The architectures Model::load accepts, e.g. {"llama", "qwen2"}.
std::vector<std::string> supported_architectures();

// Weights stay in the file's memory mapping and are used as stored, in every type dequantize()
// decodes (ggml_type_decodable). Copies share the same weights.
class Model {
 public:
  // Throws FormatError naming the problem: an unsupported architecture (listing the supported
  // ones), a missing or misshapen tensor, an unsupported tensor type, bad hyperparameters.
  static Model load(const std::string& path);
  static Model from_gguf(GgufFile file);

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const GgufFile& file() const;
  size_t parameter_count() const;
  size_t weight_bytes() const;

  struct Impl;

 private:
  friend struct ModelInternals;  // the runtime's access to the weights (src/runtime/model/model_impl.h)
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// Where a session runs. Cuda needs a build with the CUDA backend (-DVELOXQUANT_CUDA=ON) and a
// cache method with CUDA kernels (docs/cuda.md): weights and caches live in GPU memory.
enum class Device { Cpu, Cuda };
// "cpu" or "cuda"; throws Error naming the value otherwise.
Device parse_device(std::string_view name);
// Whether this build has the CUDA backend.
bool cuda_built();
// Device::Cuda's weights and projection inputs: F16 (half the memory and bandwidth) or F32 (the
// CPU's arithmetic, so quantized caches see the CPU's keys; docs/cuda.md compares both).
enum class GpuWeights { F16, F32 };
// "f16" or "f32"; throws Error naming the value otherwise.
GpuWeights parse_gpu_weights(std::string_view name);

struct SessionOptions {
  std::string kv_spec = "fp16";  // cache method for keys and values of every layer
  size_t context = 0;            // maximum tokens; 0 means the model's context_length
  Device device = Device::Cpu;
  GpuWeights gpu_weights = GpuWeights::F16;
  // Sequences decoded in lockstep, each with its own caches and all of the same length (device
  // cuda: every step reads the weights once for all of them). The CPU runtime runs batch 1.
  size_t batch = 1;
};

// Which logits eval() computes: none, the last token's, every token's, or the last token's kept
// in the session for sample() and not returned (on Device::Cuda they stay in GPU memory).
enum class Logits { None, Last, All, Sample };

struct SessionStep;  // below

// One sequence being decoded: the model plus one KV cache per layer.
class Session {
 public:
  explicit Session(Model model, SessionOptions options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs `tokens` at positions [position(), position() + n) as one batch (prefill when n > 1),
  // appending their keys and values to the caches. Returns vocab logits for the last token
  // (Logits::Last), for every token ([n, vocab], Logits::All) or nothing. Throws Error if a
  // token id is out of range or n > room().
  std::vector<float> eval(std::span<const int32_t> tokens, Logits which = Logits::Last);
  // eval for every sequence of a batched session (SessionOptions::batch): tokens [batch, n], the
  // n tokens of sequence b from tokens[b * n]; returns [batch, rows, vocab] logits (rows: 1, n
  // or 0 as `which` says). eval() is eval_batch() of a batch-1 session and refuses a larger one.
  std::vector<float> eval_batch(std::span<const int32_t> tokens, Logits which = Logits::Last);
  // The next token, picked by `sampler` from the logits the last eval kept (Logits::Sample), as
  // sampler.sample() would pick it from those logits: on Device::Cuda on the GPU, only the id
  // coming back to the host. Does not record the token (Sampler::accept does). Throws Error
  // unless the last eval was Logits::Sample; sample_batch takes one sampler per sequence.
  int32_t sample(Sampler& sampler);
  std::vector<int32_t> sample_batch(std::span<Sampler> samplers);

  size_t position() const;
  size_t context() const;
  // Tokens that still fit: the context minus what the caches hold. Caches that evict stay within
  // their budgets, so with them a sequence can run past the context (streaming_llm forever).
  size_t room() const;
  const Model& model() const;
  // The caches' spec, as parsed.
  const Spec& spec() const;
  Device device() const;
  // Exact bytes stored by all layers' caches (keys, values, both; every sequence's), and what
  // fp16 caches would store.
  size_t key_bytes() const;
  size_t value_bytes() const;
  size_t kv_bytes() const;
  // On Device::Cuda, the bytes the weights take on the GPU, decoded once at load from their
  // stored types to SessionOptions::gpu_weights; 0 on the CPU, which uses them as stored.
  size_t device_weight_bytes() const;
  size_t kv_fp16_bytes() const;
  // What all layers' caches take from the allocator now, and the sum of each layer's most since
  // the last reset (KVCache::held_bytes, peak_held_bytes): the memory behind kv_bytes(). 0 on
  // Device::Cuda, whose caches reserve the whole context on the GPU when the session is made.
  size_t kv_held_bytes() const;
  size_t kv_peak_held_bytes() const;
  // Forgets every token (the caches start empty again), the attached observer's too.
  void reset();
  // Reports every layer's forward step to `observer` (not owned; null detaches it). Throws Error
  // unless the session is empty, since the observer compares the caches with every token, and
  // for a model whose attention is not plain softmax over every token (sliding windows,
  // soft-capping, its own query scale), which the observer's exact attention would misstate.
  void set_observer(CacheObserver* observer);

  // The token ids sequence `sequence` evaluated so far, oldest first: position() of them. Throws
  // Error naming the range when the session has no such sequence.
  std::span<const int32_t> tokens(size_t sequence = 0) const;
  // Sequences decoded in lockstep (SessionOptions::batch).
  size_t batch() const;
  // One cache per layer that stores keys and values (ModelConfig::cache_layers; session files
  // save them). On Device::Cuda, host copies of the GPU caches' streams, downloaded at each call
  // and valid until the next. Throws Error for a session of several sequences; set_observer() with
  // an observer throws on Device::Cuda.
  std::span<const KVCache> caches() const;
  // The shape of each of those caches (KV heads, head_dim, layer, seed, RoPE, window,
  // calibration), without building or downloading them.
  std::vector<LayerShape> cache_shapes() const;
  // Replaces the token history and every layer's cache at once (session files restore them; on
  // Device::Cuda the streams are uploaded to the GPU caches).
  // Throws Error, leaving the session unchanged, unless there is one cache per cache layer, each with
  // this session's spec and that layer's shape (KV heads, head_dim, layer index, seed) and holding
  // tokens.size() tokens, and the tokens are valid ids that fit the context. (Should the upload
  // itself fail on Device::Cuda, the session is left empty.)
  void restore(std::vector<int32_t> tokens, std::vector<KVCache> caches);

 private:
  friend std::vector<std::vector<float>> eval_sessions(std::span<const SessionStep> steps);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One session's share of eval_sessions(): its next tokens, the logits wanted, and, when the
// tokens are a chunk of a longer prompt, how many of its tokens later steps bring (so that SnapKV
// and its relatives select once, after the whole prompt: KVCache::continue_prompt).
struct SessionStep {
  Session* session = nullptr;
  std::span<const int32_t> tokens;
  Logits which = Logits::Last;
  size_t prompt_rest = 0;
};

// Several sessions' next tokens as one forward step (a server's continuous batch: prompt chunks
// and single decode tokens of sequences at different positions): every projection runs on all
// of their tokens at once, so the weights are read once for all of them, and each session
// appends to and attends through its own caches, as its own eval() would. The sessions must be
// distinct, run on the CPU with batch 1 and share one model and context. Returns, per step, what
// eval() would (Logits::Sample keeps them in the session for sample()). Throws Error naming the
// step and the problem (token ids, room, the requirements above) before anything runs.
std::vector<std::vector<float>> eval_sessions(std::span<const SessionStep> steps);

}  // namespace veloxquant
