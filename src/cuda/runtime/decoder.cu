// DeviceDecoder (veloxquant/cuda_decoder.h): device copies of the weights, scratch buffers sized
// for the longest step, one DeviceCache per layer, and the forward pass in the CPU runtime's
// order (runtime/session/session.cpp). Projections are cuBLAS GEMMs on fp16 (or f32) weights and
// inputs with f32 accumulation and f32 outputs, and our own matrix-vector kernel when a step is
// one token; the residual stream stays f32.
#include <cublas_v2.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "cuda/common/check.cuh"
#include "cuda/common/device_array.cuh"
#include "cuda/runtime/decoder_kernels.h"
#include "veloxquant/cuda_decoder.h"
#include "veloxquant/cuda_sampler.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string(call) + " failed at " + project_path(file) + ":" + std::to_string(line) + ": " +
                cublasGetStatusName(status) + "; expected CUBLAS_STATUS_SUCCESS");
  }
}
#define VQ_CUBLAS_CHECK(call) check_cublas((call), #call, __FILE__, __LINE__)

template <class T>
DeviceArray<T> upload(const std::vector<T>& host, size_t expected, const std::string& name) {
  if (host.size() != expected) {
    throw Error("cuda decoder: weight " + name + " holds " + std::to_string(host.size()) +
                " values; expected " + std::to_string(expected));
  }
  return DeviceArray<T>(host.data(), host.size());
}

// Values of the decoder's precision: fp16 or f32, with cuBLAS's name for them.
template <class T>
constexpr cudaDataType_t blas_type() { return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16F; }
size_t element_bytes(Precision p) { return p == Precision::F32 ? 4 : 2; }

struct Matrix {
  DeviceArray<uint8_t> w;  // [rows, cols] row-major, in the decoder's precision
  int rows = 0, cols = 0;
  template <class T>
  const T* as() const { return reinterpret_cast<const T*>(w.ptr); }
};

Matrix upload_matrix(const HostMatrix& host, size_t rows, size_t cols, Precision p, const std::string& name) {
  Matrix m;
  if (host.size() != rows * cols * element_bytes(p)) {
    throw Error("cuda decoder: weight " + name + " holds " + std::to_string(host.size()) + " bytes; expected " +
                std::to_string(rows) + " x " + std::to_string(cols) + " values of " +
                std::to_string(element_bytes(p)) + " bytes");
  }
  m.w = DeviceArray<uint8_t>(host.data(), host.size());
  m.rows = static_cast<int>(rows), m.cols = static_cast<int>(cols);
  return m;
}

struct Layer {
  DeviceArray<float> attn_norm, ffn_norm, bq, bk, bv;
  DeviceArray<float> q_norm, k_norm, post_attn_norm, post_ffn_norm;  // empty when the block has none
  DeviceArray<double> inv_freq;                                      // the layer's RoPE frequencies
  Matrix wq, wk, wv, wo, gate, up, down;
};

}  // namespace

struct DeviceDecoder::Impl {
  DecoderShape shape;
  std::vector<CacheConfig> cache_configs;
  size_t max_step = 0, tokens = 0, weight_bytes = 0;
  size_t batch = 1;  // sequences in lockstep; activation rows are [tokens, batch] (token-major)
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<Layer> layers;
  Matrix embed, output;  // output.w empty when tied
  DeviceArray<float> output_norm;
  std::vector<std::unique_ptr<DeviceCache>> caches;
  std::unique_ptr<DeviceSampler> sampler;  // made by the first sample()
  size_t logit_rows = 0;  // tokens per sequence whose logits the last step left in `logits`
  // Scratch for one step of up to max_step tokens of every sequence.
  DeviceArray<int32_t> token_ids;
  DeviceArray<int64_t> positions;
  DeviceArray<float> x, qf, kf, vf, attn, proj, gate, up, logits;
  DeviceArray<__half> q16, k16, v16;
  // The projections' inputs, in the decoder's precision: normed rows, attention outputs (F16
  // only: F32 projects attn itself), SwiGLU outputs.
  DeviceArray<uint8_t> h, attn_in, ffn_in;

  // y[n, w.rows] = x[n, w.cols] w^T: column-major, that is y^T = w x^T with w read transposed.
  // F32 asks for f32 arithmetic throughout (no TF32), as the CPU computes.
  template <class T>
  void project(const Matrix& w, const T* in, int n, float* y) const {
    if (n == 1 && w.cols * sizeof(T) % 16 == 0) return launch_gemv(w.as<T>(), w.rows, w.cols, in, y, stream);
    const float one = 1.0f, zero = 0.0f;
    const cublasComputeType_t compute = std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    VQ_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, w.rows, n, w.cols, &one, w.as<T>(), blas_type<T>(),
                                 w.cols, in, blas_type<T>(), w.cols, &zero, y, CUDA_R_32F, w.rows, compute,
                                 CUBLAS_GEMM_DEFAULT));
  }

  // Queries (scaled as the shape says) or keys of layer l, rotated (but keys a cache turns itself)
  // and rounded to fp16.
  void rope(size_t l, const float* in, int n, int heads, bool queries, __half* out,
            bool unrotated = false) const {
    const RopeParams& rope = shape.ropes[l];
    RopeRows r;
    r.x = in, r.n = n, r.batch = static_cast<int>(batch), r.heads = heads, r.head_dim = static_cast<int>(shape.head_dim);
    r.positions = positions.ptr, r.inv_freq = layers[l].inv_freq.ptr;
    r.rope_half = unrotated ? 0 : static_cast<int>(rope.dims / 2);
    r.magnitude = rope.magnitude;
    r.neox = rope.layout == RopeLayout::Neox;
    r.head_major = !queries, r.out = out;
    if (queries) {
      r.scale = shape.query_scale, r.temperature_scale = shape.temperature_scale;
      r.temperature_floor = shape.temperature_floor;
    }
    launch_rope_rows(r, stream);
  }

  template <class T>
  T* buffer(DeviceArray<uint8_t>& b) { return reinterpret_cast<T*>(b.ptr); }

  // n tokens of every sequence: rows = n x batch.
  template <class T>
  void layer(size_t l, int n) {
    const Layer& w = layers[l];
    const int d = static_cast<int>(shape.embedding), hq = static_cast<int>(shape.heads);
    const int hkv = static_cast<int>(shape.kv_heads), hd = static_cast<int>(shape.head_dim);
    const int ff = static_cast<int>(shape.feed_forward), rows = n * static_cast<int>(batch);
    const size_t r = static_cast<size_t>(rows);
    T* normed = buffer<T>(h);
    launch_rms_norm(x.ptr, w.attn_norm.ptr, rows, d, shape.rms_eps, normed, stream);
    project(w.wq, normed, rows, qf.ptr);
    project(w.wk, normed, rows, kf.ptr);
    project(w.wv, normed, rows, vf.ptr);
    if (w.bq.size) launch_add_bias(qf.ptr, w.bq.ptr, rows, hq * hd, stream);
    if (w.bk.size) launch_add_bias(kf.ptr, w.bk.ptr, rows, hkv * hd, stream);
    if (w.bv.size) launch_add_bias(vf.ptr, w.bv.ptr, rows, hkv * hd, stream);
    if (shape.qk_norm) {
      launch_rms_norm(qf.ptr, w.q_norm.ptr, rows * hq, hd, shape.rms_eps, qf.ptr, stream);
      launch_rms_norm(kf.ptr, w.k_norm.ptr, rows * hkv, hd, shape.rms_eps, kf.ptr, stream);
    }
    rope(l, qf.ptr, n, hq, true, q16.ptr);
    rope(l, kf.ptr, n, hkv, false, k16.ptr, turns_keys(cache_configs[l]));
    RopeRows values;  // values only change layout: no pair is rotated
    values.x = vf.ptr, values.n = n, values.batch = static_cast<int>(batch), values.heads = hkv, values.head_dim = hd;
    values.head_major = true, values.out = v16.ptr;
    launch_rope_rows(values, stream);
    DeviceCache& cache = *caches[l];
    cache.append(reinterpret_cast<const uint16_t*>(k16.ptr), reinterpret_cast<const uint16_t*>(v16.ptr),
                 positions.ptr, static_cast<size_t>(n), stream);
    cache.attend_causal(reinterpret_cast<const uint16_t*>(q16.ptr), static_cast<size_t>(n),
                        static_cast<size_t>(hq), attn.ptr, stream);
    cache.finish_step();
    if constexpr (std::is_same_v<T, float>) {
      project(w.wo, attn.ptr, rows, proj.ptr);
    } else {
      launch_to_half(attn.ptr, r * hq * hd, buffer<__half>(attn_in), stream);
      project(w.wo, buffer<__half>(attn_in), rows, proj.ptr);
    }
    if (shape.post_norms)
      launch_rms_norm(proj.ptr, w.post_attn_norm.ptr, rows, d, shape.rms_eps, proj.ptr, stream);
    launch_add(x.ptr, proj.ptr, r * d, stream);
    launch_rms_norm(x.ptr, w.ffn_norm.ptr, rows, d, shape.rms_eps, normed, stream);
    project(w.gate, normed, rows, gate.ptr);
    project(w.up, normed, rows, up.ptr);
    launch_gated(shape.gelu, gate.ptr, up.ptr, r * ff, buffer<T>(ffn_in), stream);
    project(w.down, buffer<T>(ffn_in), rows, proj.ptr);
    if (shape.post_norms)
      launch_rms_norm(proj.ptr, w.post_ffn_norm.ptr, rows, d, shape.rms_eps, proj.ptr, stream);
    launch_add(x.ptr, proj.ptr, r * d, stream);
  }

  // The step's work after the token ids and positions are on the device.
  // Logits for tokens [first_logit, n) of every sequence: rows [first_logit x batch, n x batch).
  template <class T>
  void forward(int n, size_t first_logit) {
    const int d = static_cast<int>(shape.embedding), b = static_cast<int>(batch);
    launch_embed_rows(embed.as<T>(), token_ids.ptr, n * b, d, shape.embedding_scale, x.ptr, stream);
    for (size_t l = 0; l < shape.layers; ++l) layer<T>(l, n);
    if (first_logit >= static_cast<size_t>(n)) return;
    const int rows = (n - static_cast<int>(first_logit)) * b;
    launch_rms_norm(x.ptr + first_logit * batch * d, output_norm.ptr, rows, d, shape.rms_eps, buffer<T>(h), stream);
    project(output.w.ptr != nullptr ? output : embed, buffer<T>(h), rows, logits.ptr);
    if (shape.final_softcap != 0.0f)
      launch_softcap(logits.ptr, static_cast<size_t>(rows) * shape.vocab, shape.final_softcap, stream);
  }

  // Caches that take keys before RoPE and turn them themselves: a method storing them unrotated
  // (turned when read), or an evicting cache's sinks (turned to their cache positions at attend;
  // the cache turns its other keys on append).
  static bool turns_keys(const CacheConfig& c) { return c.keys_before_rope || c.sinks > 0; }

  void make_caches() {
    caches.clear();
    for (size_t l = 0; l < cache_configs.size(); ++l) {
      CacheConfig c = cache_configs[l];
      if (turns_keys(c)) c.rope = shape.ropes[l];
      caches.push_back(std::make_unique<DeviceCache>(c));
    }
    tokens = 0;
  }
};

DeviceDecoder::DeviceDecoder(const DecoderShape& shape, const DecoderWeights& weights,
                             std::vector<CacheConfig> caches, size_t max_step)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.shape = shape;
  m.max_step = max_step;
  const size_t d = shape.embedding, hd = shape.head_dim, qw = shape.heads * hd, kvw = shape.kv_heads * hd;
  const size_t ff = shape.feed_forward, vocab = shape.vocab;
  if (max_step == 0) throw Error("cuda decoder: max_step 0; expected at least 1 token per step");
  if (weights.layers.size() != shape.layers || caches.size() != shape.layers) {
    throw Error("cuda decoder: " + std::to_string(weights.layers.size()) + " layers of weights and " +
                std::to_string(caches.size()) + " caches; expected " + std::to_string(shape.layers) + " each");
  }
  if (shape.ropes.size() != shape.layers) {
    throw Error("cuda decoder: " + std::to_string(shape.ropes.size()) +
                " RoPE settings; expected one per layer (" + std::to_string(shape.layers) + ")");
  }
  if (shape.temperature_scale != 0.0f && shape.temperature_floor < 1) {
    throw Error("cuda decoder: temperature floor " + std::to_string(shape.temperature_floor) +
                "; expected at least 1 token with a temperature scale");
  }
  if (shape.heads == 0 || shape.kv_heads == 0 || shape.heads % shape.kv_heads != 0) {
    throw Error("cuda decoder: " + std::to_string(shape.heads) + " query heads over " +
                std::to_string(shape.kv_heads) + " KV heads; expected a whole multiple");
  }
  m.cache_configs = std::move(caches);
  m.batch = m.cache_configs.empty() ? 1 : m.cache_configs.front().batch;
  for (const CacheConfig& c : m.cache_configs) {
    if (c.rope.dims != 0 || c.batch != m.batch || c.batch == 0 || c.kv_heads != shape.kv_heads || c.head_dim != hd) {
      throw Error("cuda decoder: a cache configuration for batch " + std::to_string(c.batch) + ", " +
                  std::to_string(c.kv_heads) + " KV heads x " + std::to_string(c.head_dim) +
                  (c.rope.dims ? " with RoPE" : "") + "; expected batch " + std::to_string(std::max<size_t>(m.batch, 1)) +
                  " (every layer the same, at least 1), " + std::to_string(shape.kv_heads) + " x " + std::to_string(hd) +
                  " and no RoPE (keys arrive rotated)");
    }
  }
  VQ_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  VQ_CUBLAS_CHECK(cublasCreate(&m.blas));
  VQ_CUBLAS_CHECK(cublasSetStream(m.blas, m.stream));
  const Precision p = shape.precision;
  m.embed = upload_matrix(weights.token_embd, vocab, d, p, "token_embd");
  if (!weights.output.empty()) m.output = upload_matrix(weights.output, vocab, d, p, "output");
  m.output_norm = upload(weights.output_norm, d, "output_norm");
  for (size_t l = 0; l < shape.layers; ++l) {
    const DecoderLayerWeights& in = weights.layers[l];
    const std::string at = " of layer " + std::to_string(l);
    Layer w;
    w.attn_norm = upload(in.attn_norm, d, "attn_norm" + at);
    w.ffn_norm = upload(in.ffn_norm, d, "ffn_norm" + at);
    if (shape.qk_norm) {
      w.q_norm = upload(in.q_norm, hd, "attn_q_norm" + at);
      w.k_norm = upload(in.k_norm, hd, "attn_k_norm" + at);
    }
    if (shape.post_norms) {
      w.post_attn_norm = upload(in.post_attn_norm, d, "post_attention_norm" + at);
      w.post_ffn_norm = upload(in.post_ffn_norm, d, "post_ffw_norm" + at);
    }
    const RopeParams& rope = shape.ropes[l];
    if (rope.dims % 2 != 0 || rope.dims > hd) {
      throw Error("cuda decoder: RoPE dims " + std::to_string(rope.dims) + at +
                  "; expected an even number <= head_dim " + std::to_string(hd));
    }
    // The CPU's apply_rope frequencies, from the same function.
    std::vector<double> inv_freq(std::max<size_t>(rope.dims / 2, 1), 0.0);
    for (size_t i = 0; i < rope.dims / 2; ++i) inv_freq[i] = rope_inverse_frequency(rope, i);
    w.inv_freq = DeviceArray<double>(inv_freq.data(), inv_freq.size());
    if (!in.bq.empty() || !in.bk.empty() || !in.bv.empty()) {
      w.bq = upload(in.bq, qw, "attn_q.bias" + at);
      w.bk = upload(in.bk, kvw, "attn_k.bias" + at);
      w.bv = upload(in.bv, kvw, "attn_v.bias" + at);
    }
    w.wq = upload_matrix(in.wq, qw, d, p, "attn_q" + at);
    w.wk = upload_matrix(in.wk, kvw, d, p, "attn_k" + at);
    w.wv = upload_matrix(in.wv, kvw, d, p, "attn_v" + at);
    w.wo = upload_matrix(in.wo, d, qw, p, "attn_output" + at);
    w.gate = upload_matrix(in.gate, ff, d, p, "ffn_gate" + at);
    w.up = upload_matrix(in.up, ff, d, p, "ffn_up" + at);
    w.down = upload_matrix(in.down, d, ff, p, "ffn_down" + at);
    for (const Matrix* x : {&w.wq, &w.wk, &w.wv, &w.wo, &w.gate, &w.up, &w.down}) m.weight_bytes += x->w.size;
    m.weight_bytes += 4 * (w.attn_norm.size + w.ffn_norm.size + w.bq.size + w.bk.size + w.bv.size +
                           w.q_norm.size + w.k_norm.size + w.post_attn_norm.size + w.post_ffn_norm.size);
    m.layers.push_back(std::move(w));
  }
  m.weight_bytes += m.embed.w.size + m.output.w.size + 4 * m.output_norm.size;
  const size_t n = max_step * m.batch;  // activation rows of the longest step
  m.token_ids = DeviceArray<int32_t>(n);
  m.positions = DeviceArray<int64_t>(n);
  m.x = DeviceArray<float>(n * d), m.proj = DeviceArray<float>(n * d);
  m.qf = DeviceArray<float>(n * qw), m.attn = DeviceArray<float>(n * qw);
  m.kf = DeviceArray<float>(n * kvw), m.vf = DeviceArray<float>(n * kvw);
  m.gate = DeviceArray<float>(n * ff), m.up = DeviceArray<float>(n * ff);
  m.logits = DeviceArray<float>(n * vocab);
  m.q16 = DeviceArray<__half>(n * qw);
  m.k16 = DeviceArray<__half>(n * kvw), m.v16 = DeviceArray<__half>(n * kvw);
  const size_t e = element_bytes(p);
  m.h = DeviceArray<uint8_t>(n * d * e), m.ffn_in = DeviceArray<uint8_t>(n * ff * e);
  if (p == Precision::F16) m.attn_in = DeviceArray<uint8_t>(n * qw * 2);
  m.make_caches();
}

DeviceDecoder::~DeviceDecoder() {
  Impl& m = *impl_;
  // Destructors do not throw: failures here have nothing left to report to.
  if (m.blas != nullptr) cublasDestroy(m.blas);
  if (m.stream != nullptr) cudaStreamDestroy(m.stream);
}

void DeviceDecoder::step(const int32_t* tokens, size_t n, size_t first_logit, float* logits) {
  Impl& m = *impl_;
  const size_t batch = m.batch, vocab = m.shape.vocab;
  if (n == 0 || n > m.max_step) {
    throw Error("cuda decoder: a step of " + std::to_string(n) + " tokens; expected 1.." + std::to_string(m.max_step));
  }
  for (size_t t = 0; t < n * batch; ++t) {
    if (tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= vocab) {
      throw Error("cuda decoder: token id " + std::to_string(tokens[t]) + "; expected 0.." + std::to_string(vocab - 1));
    }
  }
  // Sequence-major in, token-major rows on the device; positions [batch, n], the same for all.
  std::vector<int32_t> rows(n * batch);
  std::vector<int64_t> positions(n * batch);
  for (size_t b = 0; b < batch; ++b) {
    for (size_t i = 0; i < n; ++i) {
      rows[i * batch + b] = tokens[b * n + i];
      positions[b * n + i] = static_cast<int64_t>(m.tokens + i);
    }
  }
  VQ_CUDA_CHECK(cudaMemcpyAsync(m.token_ids.ptr, rows.data(), rows.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                m.stream));
  VQ_CUDA_CHECK(cudaMemcpyAsync(m.positions.ptr, positions.data(), positions.size() * sizeof(int64_t),
                                cudaMemcpyHostToDevice, m.stream));
  if (m.shape.precision == Precision::F32) m.forward<float>(static_cast<int>(n), first_logit);
  else m.forward<__half>(static_cast<int>(n), first_logit);
  m.tokens += n;
  m.logit_rows = first_logit < n ? n - first_logit : 0;
  if (first_logit < n && logits != nullptr) {
    // Row (i, b) of the device's logits to logits[b][i - first_logit].
    const size_t kept = n - first_logit, row_bytes = vocab * sizeof(float);
    for (size_t b = 0; b < batch; ++b) {
      VQ_CUDA_CHECK(cudaMemcpy2DAsync(logits + b * kept * vocab, row_bytes, m.logits.ptr + b * vocab, batch * row_bytes,
                                      row_bytes, kept, cudaMemcpyDeviceToHost, m.stream));
    }
  }
  VQ_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

std::vector<int32_t> DeviceDecoder::sample(std::span<const SampleRequest> requests) {
  Impl& m = *impl_;
  if (m.logit_rows == 0) {
    throw Error("cuda decoder: sample after a step that computed no logits; expected a step with first_logit < n");
  }
  if (requests.size() != m.batch) {
    throw Error("cuda decoder: " + std::to_string(requests.size()) + " sample requests for " +
                std::to_string(m.batch) + " sequences; expected one per sequence");
  }
  if (!m.sampler) m.sampler = std::make_unique<DeviceSampler>(m.shape.vocab, m.batch);
  // Rows are token-major: the last token's row of every sequence, one after another.
  const float* last = m.logits.ptr + (m.logit_rows - 1) * m.batch * m.shape.vocab;
  return m.sampler->sample(last, m.shape.vocab, requests, m.stream);
}

size_t DeviceDecoder::tokens() const { return impl_->tokens; }
size_t DeviceDecoder::batch() const { return impl_->batch; }

size_t DeviceDecoder::key_bytes() const {
  size_t bytes = 0;
  for (const auto& c : impl_->caches) bytes += c->stored_key_bytes();
  return bytes;
}

size_t DeviceDecoder::value_bytes() const {
  size_t bytes = 0;
  for (const auto& c : impl_->caches) bytes += c->stored_value_bytes();
  return bytes;
}

size_t DeviceDecoder::weight_bytes() const { return impl_->weight_bytes; }

void DeviceDecoder::reset() {
  impl_->make_caches();
  impl_->logit_rows = 0;
}

const DeviceCache& DeviceDecoder::cache(size_t layer) const {
  require<Error>(layer < impl_->caches.size(), "cuda decoder",
                 "cache of layer " + std::to_string(layer) + "; the model has " +
                     std::to_string(impl_->caches.size()));
  return *impl_->caches[layer];
}

void DeviceDecoder::restore(size_t tokens, std::span<const LayerStreams> layers) {
  Impl& m = *impl_;
  require<Error>(layers.size() == m.caches.size(), "cuda decoder restore",
                 std::to_string(layers.size()) + " layers of streams; expected the model's " +
                     std::to_string(m.caches.size()));
  reset();
  try {
    for (size_t l = 0; l < layers.size(); ++l) {
      try {
        m.caches[l]->upload(tokens, layers[l].keys, layers[l].values);
      } catch (const Error& e) {
        throw Error("layer " + std::to_string(l) + ": " + e.what());
      }
    }
  } catch (...) {
    reset();
    throw;
  }
  m.tokens = tokens;
}

}  // namespace veloxquant::cuda
