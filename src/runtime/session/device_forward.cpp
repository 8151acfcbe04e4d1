// make_device_forward(): the model's weights as fp16 and each layer's device cache
// configuration, handed to cuda::DeviceDecoder. Without the CUDA backend it says how to get it.
#include "runtime/session/device_forward.h"

#include "veloxquant/error.h"

#ifdef VELOXQUANT_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/simd.h"
#include "runtime/model/model_impl.h"
#include "veloxquant/cuda_decoder.h"
#include "veloxquant/method.h"
#endif

namespace veloxquant::runtime {

#ifdef VELOXQUANT_WITH_CUDA
namespace {

// Every row decoded to f32 as the CPU runtime reads it, kept as f32 or rounded to fp16.
cuda::HostMatrix host_matrix(const WeightMatrix& w, cuda::Precision p) {
  const size_t bytes = p == cuda::Precision::F32 ? 4 : 2;
  cuda::HostMatrix out(w.rows * w.cols * bytes);
  std::vector<float> row(w.cols);
  for (size_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    uint8_t* dst = &out[r * w.cols * bytes];
    if (p == cuda::Precision::F32) std::memcpy(dst, row.data(), w.cols * 4);
    else simd::f32_to_f16(row.data(), reinterpret_cast<uint16_t*>(dst), w.cols);
  }
  return out;
}

class CudaForward final : public DeviceForward {
 public:
  CudaForward(const cuda::DecoderShape& shape, const cuda::DecoderWeights& weights,
              std::vector<cuda::CacheConfig> caches, size_t max_step)
      : decoder_(shape, weights, std::move(caches), max_step),
        weight_bytes_(matrix_bytes(weights)),
        layers_(shape.layers) {}
  void step(const int32_t* tokens, size_t n, size_t first_logit, float* logits) override {
    decoder_.step(tokens, n, first_logit, logits);
  }
  std::vector<int32_t> sample(std::span<const SampleRequest> requests) override { return decoder_.sample(requests); }
  size_t held_tokens() const override {
    size_t held = 0;
    for (size_t l = 0; l < layers_; ++l) held = std::max(held, decoder_.cache(l).held_tokens());
    return held;
  }
  size_t key_bytes() const override { return decoder_.key_bytes(); }
  size_t value_bytes() const override { return decoder_.value_bytes(); }
  size_t weight_bytes() const override { return weight_bytes_; }
  void reset() override { decoder_.reset(); }
  void download(size_t layer, std::vector<CacheStream>& keys,
                std::vector<CacheStream>& values) const override {
    const cuda::DeviceCache& cache = decoder_.cache(layer);
    keys.clear(), values.clear();
    for (size_t h = 0; h < cache.config().kv_heads; ++h) {
      keys.push_back(host_to_cpu(cache.download_keys(0, h)));
      values.push_back(host_to_cpu(cache.download_values(0, h)));
    }
  }
  void restore(size_t tokens, std::span<const KVCache> caches) override {
    std::vector<cuda::LayerStreams> layers(caches.size());
    for (size_t l = 0; l < caches.size(); ++l) {
      const bool spec_states = caches[l].states_from_spec();
      for (const CacheStream& s : caches[l].key_streams())
        layers[l].keys.push_back(cpu_to_host(s, spec_states));
      for (const CacheStream& s : caches[l].value_streams())
        layers[l].values.push_back(cpu_to_host(s, spec_states));
    }
    decoder_.restore(tokens, layers);
  }

 private:
  // A state the GPU keeps (kvquant_nuq's first token) comes with the stream; one it takes from the
  // spec instead is left empty, and KVCache::restore gives the stream the spec's (vecinfer's tables).
  static CacheStream host_to_cpu(cuda::HostStream s) {
    return CacheStream{std::move(s.state), std::move(s.codes), s.encoded, std::move(s.tail), s.tail_tokens};
  }
  // A state that is the spec's (KVCache::restore checked it) is dropped; one fitted to the tokens
  // goes along, and the device cache refuses it when its format keeps none.
  static cuda::HostStream cpu_to_host(const CacheStream& s, bool spec_states) {
    return cuda::HostStream{s.codes, s.encoded, s.tail, s.tail_tokens,
                            spec_states ? std::vector<uint8_t>{} : s.state};
  }
  static size_t matrix_bytes(const cuda::DecoderWeights& w) {
    size_t n = w.token_embd.size() + w.output.size();
    for (const cuda::DecoderLayerWeights& l : w.layers)
      n += l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() + l.gate.size() + l.up.size() + l.down.size();
    return n;
  }
  cuda::DeviceDecoder decoder_;
  size_t weight_bytes_;
  size_t layers_;
};

}  // namespace

std::unique_ptr<DeviceForward> make_device_forward(const Model& model, const Spec& spec,
                                                   std::span<const RopeParams> ropes, size_t context,
                                                   size_t max_step, size_t batch, GpuWeights weights,
                                                   std::shared_ptr<const CalibrationArtifact> calibration) {
  const cuda::Precision p = weights == GpuWeights::F32 ? cuda::Precision::F32 : cuda::Precision::F16;
  const ModelConfig& c = model.config();
  const Model::Impl& m = ModelInternals::of(model);
  std::vector<cuda::CacheConfig> caches;
  for (uint32_t l = 0; l < c.layers; ++l) {
    LayerShape shape{c.kv_heads, c.head_dim, static_cast<int>(l), 0};
    shape.layers = static_cast<int>(c.layers);
    shape.window = c.sliding(l) ? c.sliding_window : 0;
    shape.softcap = c.attention_softcap;
    shape.calibration = calibration;
    caches.push_back(cuda::device_cache_config(spec, shape, batch, context));
    // A step appends at most max_step tokens: a windowed layer keeps the codes of its window and
    // one step, an evicting one those of its budget and one step, not of the whole context.
    if (shape.window > 0 || caches.back().budget > 0) caches.back().max_append = max_step;
  }
  cuda::DecoderShape shape;
  shape.layers = c.layers, shape.embedding = c.embedding, shape.feed_forward = c.feed_forward;
  shape.heads = c.heads, shape.kv_heads = c.kv_heads, shape.head_dim = c.head_dim;
  shape.vocab = c.vocab, shape.rms_eps = c.rms_eps, shape.precision = p;
  shape.ropes.assign(ropes.begin(), ropes.end());
  shape.qk_norm = c.qk_norm, shape.post_norms = c.post_norms,
  shape.gelu = c.activation == Activation::GeluTanh;
  shape.embedding_scale = c.embedding_scale, shape.final_softcap = c.final_softcap;
  // The session's query scale (Session::Impl::layer): the model's own, in place of 1/sqrt(head_dim).
  if (c.attention_scale != 0.0f)
    shape.query_scale = c.attention_scale * std::sqrt(static_cast<float>(c.head_dim));
  shape.temperature_scale = c.attention_temperature_scale;
  if (c.attention_temperature_scale != 0.0f) shape.temperature_floor = c.attention_temperature_floor;
  cuda::DecoderWeights w;
  w.token_embd = host_matrix(m.token_embd, p);
  if (!c.tied_output) w.output = host_matrix(m.output, p);
  w.output_norm = m.output_norm;
  for (const LayerWeights& in : m.layers) {
    cuda::DecoderLayerWeights& out = w.layers.emplace_back();
    out.attn_norm = in.attn_norm, out.ffn_norm = in.ffn_norm;
    out.q_norm = in.q_norm, out.k_norm = in.k_norm;
    out.post_attn_norm = in.post_attn_norm, out.post_ffn_norm = in.post_ffn_norm;
    out.wq = host_matrix(in.wq, p), out.wk = host_matrix(in.wk, p), out.wv = host_matrix(in.wv, p);
    out.wo = host_matrix(in.wo, p), out.gate = host_matrix(in.gate, p), out.up = host_matrix(in.up, p);
    out.down = host_matrix(in.down, p);
    out.bq = in.bq, out.bk = in.bk, out.bv = in.bv;
  }
  return std::make_unique<CudaForward>(shape, w, std::move(caches), max_step);
}

#else

std::unique_ptr<DeviceForward> make_device_forward(const Model&, const Spec&, std::span<const RopeParams>,
                                                   size_t, size_t, size_t, GpuWeights,
                                                   std::shared_ptr<const CalibrationArtifact>) {
  throw Error("device cuda: this build has no CUDA backend; configure with -DVELOXQUANT_CUDA=ON "
              "(docs/cuda.md) on a machine with the CUDA toolkit");
}

#endif

}  // namespace veloxquant::runtime
