#include "runtime/session/cpu_forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/model/model_impl.h"
#include "veloxquant/observer.h"

namespace veloxquant::runtime {
namespace {

// y = x / rms(x) * w, one row of width d (w null: no weight). Sum of squares in double, as ggml
// accumulates it.
void rms_norm(const float* x, const float* w, size_t d, float eps, float* y) {
  double ss = 0;
  for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  for (size_t i = 0; i < d; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

// Every `width` floats of x[0, n), normalized in place with weight w (null: none).
void rms_norm_rows(float* x, size_t n, size_t width, const float* w, float eps) {
  for (size_t i = 0; i < n; i += width) rms_norm(&x[i], w, width, eps, &x[i]);
}

// GELU's tanh approximation, as ggml and Gemma's reference code compute it.
float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCubic * x * x)));
}

// Y[n, rows] = X[n, cols] W^T, plus bias when given.
void project(const WeightMatrix& w, const std::vector<float>& bias, const float* x, size_t n, float* y) {
  if (n == 1) matvec(w, x, y);
  else matmul(w, x, n, y);
  if (bias.empty()) return;
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < w.rows; ++i) y[t * w.rows + i] += bias[i];
}

// The gated feed-forward's nonlinearity, in place: gate = act(gate) * up.
void gated(Activation act, float* gate, const float* up, size_t n) {
  if (act == Activation::Silu) {
    for (size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) gate[i] = gelu_tanh(gate[i]) * up[i];
}

void softcap(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

// Mean over n rows of the cosine similarity between the hidden state x and x + attention output.
double mean_cosine(const float* x, const float* attn, size_t n, size_t d) {
  double total = 0;
  for (size_t t = 0; t < n; ++t) {
    double dot = 0, a = 0, b = 0;
    for (size_t i = 0; i < d; ++i) {
      const double before = x[t * d + i], after = before + attn[t * d + i];
      dot += before * after;
      a += before * before;
      b += after * after;
    }
    total += a > 0 && b > 0 ? dot / std::sqrt(a * b) : 1.0;
  }
  return total / static_cast<double>(n);
}

// Activations of one step, kept per thread across steps and sessions: a session's memory is its
// caches, and a server's many sequences share one set. Sized for the widest layer.
struct Activations {
  std::vector<float> x, h, q, k, v, attn, proj, gate, up;
  std::vector<float> per_layer, per_layer_row;  // ModelConfig::per_layer_embedding's inputs
  std::vector<int64_t> positions;               // per row

  void resize(const ModelConfig& c, size_t rows) {
    size_t qw = 0, kvw = 0, ff = c.per_layer_embedding;
    for (uint32_t l = 0; l < c.layers; ++l) {
      qw = std::max(qw, size_t{c.heads} * c.head_dim_of(l));
      kvw = std::max(kvw, size_t{c.kv_heads_of(l)} * c.head_dim_of(l));
      ff = std::max<size_t>(ff, c.feed_forward_of(l));
    }
    x.resize(rows * c.embedding);
    h.resize(rows * c.embedding);
    q.resize(rows * qw);
    attn.resize(rows * qw);
    k.resize(rows * kvw);
    v.resize(rows * kvw);
    proj.resize(rows * c.embedding);
    gate.resize(rows * ff);
    up.resize(rows * ff);
    per_layer.resize(rows * c.layers * c.per_layer_embedding);
    per_layer_row.resize(c.layers * c.per_layer_embedding);
    positions.resize(rows);
  }
};

// Layer l's queries, and for a layer with its own cache its keys and values, from the normed
// hidden state a.h: q/k RMSNorms and value norm where the model has them, before RoPE.
void project_qkv(const ModelConfig& c, const LayerWeights& w, size_t l, size_t rows, Activations& a) {
  const size_t hd = c.head_dim_of(l), qw = size_t{c.heads} * hd, kvw = size_t{c.kv_heads_of(l)} * hd;
  project(w.wq, w.bq, a.h.data(), rows, a.q.data());
  if (c.qk_norm) rms_norm_rows(a.q.data(), rows * qw, hd, w.q_norm.data(), c.rms_eps);
  if (l >= c.cache_layers()) return;  // a shared-KV layer reads an earlier layer's cache
  project(w.wk, w.bk, a.h.data(), rows, a.k.data());
  if (w.wv.rows) project(w.wv, w.bv, a.h.data(), rows, a.v.data());
  else std::copy_n(a.k.begin(), rows * kvw, a.v.begin());  // gemma4: the values are the keys' projection
  if (c.qk_norm) rms_norm_rows(a.k.data(), rows * kvw, hd, w.k_norm.data(), c.rms_eps);
  if (c.value_norm) rms_norm_rows(a.v.data(), rows * kvw, hd, nullptr, c.rms_eps);
}

// RoPE on the queries, then the model's own score scale and temperature by position: the cache
// scales scores by 1/sqrt(head_dim), so they go into the queries.
void rotate_and_scale_queries(const ModelConfig& c, const RopeParams& rope, size_t hd, size_t rows,
                              Activations& a) {
  const size_t qw = size_t{c.heads} * hd;
  for (size_t r = 0; r < rows; ++r) {
    apply_rope(rope, &a.q[r * qw], c.heads, hd, a.positions[r]);
    float scale = c.attention_scale != 0.0f ? c.attention_scale * std::sqrt(static_cast<float>(hd)) : 1.0f;
    if (c.attention_temperature_scale != 0.0f) {
      // whole periods, as llama.cpp floors them
      const int64_t periods = a.positions[r] / c.attention_temperature_floor;
      scale *= 1.0f + c.attention_temperature_scale * std::log(static_cast<float>(periods) + 1.0f);
    }
    if (scale != 1.0f)
      for (size_t i = 0; i < qw; ++i) a.q[r * qw + i] *= scale;
  }
}

// Each segment appends layer l's keys and values to its cache and attends through it; a
// shared-KV layer only attends, through the cache of ModelConfig::kv_layer, without handing
// that cache's policy its queries (the owning layer's alone rank the tokens).
void attend(const ModelConfig& c, const RopeParams& rope, size_t l, size_t rows,
            std::span<const ForwardSegment> segments, Activations& a, CacheObserver* observer) {
  const size_t hd = c.head_dim_of(l), kv_heads = c.kv_heads_of(l), qw = size_t{c.heads} * hd,
               kvw = kv_heads * hd;
  const bool own = l < c.cache_layers();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = observer ? Clock::now() : Clock::time_point{};
  for (const ForwardSegment& s : segments) {
    if (!own) continue;
    s.caches[l].append(TensorView::f32(&a.k[s.first_row * kvw], {s.n, kv_heads, hd}),
                       TensorView::f32(&a.v[s.first_row * kvw], {s.n, kv_heads, hd}),
                       std::span(&a.positions[s.first_row], s.n), rope);
  }
  const Clock::time_point appended = observer ? Clock::now() : Clock::time_point{};
  for (const ForwardSegment& s : segments) {
    const TensorView q = TensorView::f32(&a.q[s.first_row * qw], {s.n, c.heads, hd});
    if (own) s.caches[l].attend_observed(q, &a.attn[s.first_row * qw]);
    else s.caches[c.kv_layer(l)].attend(q, &a.attn[s.first_row * qw]);
  }
  if (observer) {
    const auto seconds = [](Clock::duration t) { return std::chrono::duration<double>(t).count(); };
    observer->record(l, rows, a.k.data(), a.v.data(), a.positions, a.q.data(), a.attn.data(),
                     seconds(appended - start), seconds(Clock::now() - appended));
  }
}

// gemma4's per-layer token inputs, once per step (llama.cpp's project_per_layer_inputs): each
// layer's slice of per_layer_model_proj(x) / sqrt(width), RMS-normed, plus the token's own row
// of per_layer_token_embd times sqrt(per_layer), all over sqrt(2). a.per_layer: [rows, layers, per_layer].
void per_layer_inputs(const Model::Impl& m, std::span<const int32_t> tokens, Activations& a) {
  const ModelConfig& c = m.config;
  const size_t pl = c.per_layer_embedding, all = pl * c.layers, rows = tokens.size();
  project(m.per_layer_model_proj, {}, a.x.data(), rows, a.per_layer.data());
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.embedding));
  const float token_scale = std::sqrt(static_cast<float>(pl)), input_scale = 1.0f / std::sqrt(2.0f);
  for (size_t r = 0; r < rows; ++r) {
    dequantize_row(m.per_layer_token_embd, static_cast<size_t>(tokens[r]), a.per_layer_row.data());
    float* in = &a.per_layer[r * all];
    for (size_t i = 0; i < all; ++i) in[i] *= proj_scale;
    rms_norm_rows(in, all, pl, m.per_layer_proj_norm.data(), c.rms_eps);
    for (size_t i = 0; i < all; ++i) in[i] = (in[i] + a.per_layer_row[i] * token_scale) * input_scale;
  }
}

// gemma4's per-layer block after the feed-forward: x += post_norm(proj(gelu(inp_gate(x)) * input_l)).
void per_layer_block(const ModelConfig& c, const LayerWeights& w, size_t l, size_t rows, Activations& a) {
  const size_t pl = c.per_layer_embedding, all = pl * c.layers, d = c.embedding;
  project(w.per_layer_gate, {}, a.x.data(), rows, a.gate.data());
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < pl; ++i)
      a.gate[r * pl + i] = gelu_tanh(a.gate[r * pl + i]) * a.per_layer[r * all + l * pl + i];
  project(w.per_layer_proj, {}, a.gate.data(), rows, a.proj.data());
  rms_norm_rows(a.proj.data(), rows * d, d, w.per_layer_post_norm.data(), c.rms_eps);
  for (size_t i = 0; i < rows * d; ++i) a.x[i] += a.proj[i];
}

void feed_forward(const ModelConfig& c, const LayerWeights& w, size_t l, size_t rows, Activations& a) {
  const size_t d = c.embedding;
  for (size_t r = 0; r < rows; ++r) rms_norm(&a.x[r * d], w.ffn_norm.data(), d, c.rms_eps, &a.h[r * d]);
  project(w.gate, {}, a.h.data(), rows, a.gate.data());
  project(w.up, {}, a.h.data(), rows, a.up.data());
  gated(c.activation, a.gate.data(), a.up.data(), rows * c.feed_forward_of(l));
  project(w.down, {}, a.gate.data(), rows, a.proj.data());
  if (c.post_norms) rms_norm_rows(a.proj.data(), rows * d, d, w.post_ffn_norm.data(), c.rms_eps);
  for (size_t i = 0; i < rows * d; ++i) a.x[i] += a.proj[i];
}

void layer(const Model& model, const RopeParams& rope, size_t l, size_t rows,
           std::span<const ForwardSegment> segments, Activations& a, CacheObserver* observer) {
  const ModelConfig& c = model.config();
  const LayerWeights& w = ModelInternals::of(model).layers[l];
  const size_t d = c.embedding;
  for (size_t r = 0; r < rows; ++r) rms_norm(&a.x[r * d], w.attn_norm.data(), d, c.rms_eps, &a.h[r * d]);
  project_qkv(c, w, l, rows, a);
  rotate_and_scale_queries(c, rope, c.head_dim_of(l), rows, a);
  attend(c, rope, l, rows, segments, a, observer);
  project(w.wo, {}, a.attn.data(), rows, a.proj.data());
  if (c.post_norms) rms_norm_rows(a.proj.data(), rows * d, d, w.post_attn_norm.data(), c.rms_eps);
  for (const ForwardSegment& s : segments)
    if (s.importance && l < s.importance->size())
      (*s.importance)[l] = mean_cosine(&a.x[s.first_row * d], &a.proj[s.first_row * d], s.n, d);
  for (size_t i = 0; i < rows * d; ++i) a.x[i] += a.proj[i];
  feed_forward(c, w, l, rows, a);
  if (c.per_layer_embedding) per_layer_block(c, w, l, rows, a);
  if (w.output_scale != 1.0f)
    for (size_t i = 0; i < rows * d; ++i) a.x[i] *= w.output_scale;
}

}  // namespace

void cpu_forward(const Model& model, std::span<const RopeParams> ropes, std::span<const int32_t> tokens,
                 std::span<const ForwardSegment> segments, std::span<const size_t> logit_rows, float* logits,
                 CacheObserver* observer) {
  thread_local Activations a;
  const ModelConfig& c = model.config();
  const Model::Impl& m = ModelInternals::of(model);
  const size_t d = c.embedding, rows = tokens.size();
  a.resize(c, rows);
  for (size_t r = 0; r < rows; ++r) {
    dequantize_row(m.token_embd, static_cast<size_t>(tokens[r]), &a.x[r * d]);
    if (c.embedding_scale != 1.0f)
      for (size_t i = 0; i < d; ++i) a.x[r * d + i] *= c.embedding_scale;
  }
  if (c.per_layer_embedding) per_layer_inputs(m, tokens, a);
  for (const ForwardSegment& s : segments)
    for (size_t t = 0; t < s.n; ++t) a.positions[s.first_row + t] = s.position + static_cast<int64_t>(t);
  for (size_t l = 0; l < c.layers; ++l) layer(model, ropes[l], l, rows, segments, a, observer);
  if (logit_rows.empty()) return;
  for (size_t i = 0; i < logit_rows.size(); ++i)
    rms_norm(&a.x[logit_rows[i] * d], m.output_norm.data(), d, c.rms_eps, &a.h[i * d]);
  project(m.output, {}, a.h.data(), logit_rows.size(), logits);
  if (c.final_softcap != 0.0f) softcap(logits, logit_rows.size() * c.vocab, c.final_softcap);
}

}  // namespace veloxquant::runtime
