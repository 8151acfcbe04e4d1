#include "runtime/session/cpu_forward.h"

#include <chrono>
#include <cmath>

#include "runtime/model/model_impl.h"
#include "veloxquant/observer.h"

namespace veloxquant::runtime {
namespace {

// y = x / rms(x) * w, one row of width d. Sum of squares in double, as ggml accumulates it.
void rms_norm(const float* x, const float* w, size_t d, float eps, float* y) {
  double ss = 0;
  for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  for (size_t i = 0; i < d; ++i) y[i] = x[i] * scale * w[i];
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
  // GELU's tanh approximation, as ggml and Gemma's reference code compute it.
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  for (size_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCubic * x * x))) * up[i];
  }
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
// caches, and a server's many sequences share one set.
struct Activations {
  std::vector<float> x, h, q, k, v, attn, proj, gate, up;
  std::vector<int64_t> positions;  // per row

  void resize(const ModelConfig& c, size_t rows) {
    const size_t qw = size_t{c.heads} * c.head_dim, kvw = size_t{c.kv_heads} * c.head_dim;
    x.resize(rows * c.embedding);
    h.resize(rows * c.embedding);
    q.resize(rows * qw);
    attn.resize(rows * qw);
    k.resize(rows * kvw);
    v.resize(rows * kvw);
    proj.resize(rows * c.embedding);
    gate.resize(rows * c.feed_forward);
    up.resize(rows * c.feed_forward);
    positions.resize(rows);
  }
};

void layer(const Model& model, const RopeParams& rope, size_t l, size_t rows,
           std::span<const ForwardSegment> segments, Activations& a, CacheObserver* observer) {
  const ModelConfig& c = model.config();
  const LayerWeights& w = ModelInternals::of(model).layers[l];
  const size_t d = c.embedding, hd = c.head_dim, qw = size_t{c.heads} * hd;
  const size_t kvw = size_t{c.kv_heads} * hd;
  for (size_t r = 0; r < rows; ++r) rms_norm(&a.x[r * d], w.attn_norm.data(), d, c.rms_eps, &a.h[r * d]);
  project(w.wq, w.bq, a.h.data(), rows, a.q.data());
  project(w.wk, w.bk, a.h.data(), rows, a.k.data());
  project(w.wv, w.bv, a.h.data(), rows, a.v.data());
  if (c.qk_norm) {
    for (size_t i = 0; i < rows * qw; i += hd) rms_norm(&a.q[i], w.q_norm.data(), hd, c.rms_eps, &a.q[i]);
    for (size_t i = 0; i < rows * kvw; i += hd) rms_norm(&a.k[i], w.k_norm.data(), hd, c.rms_eps, &a.k[i]);
  }
  for (size_t r = 0; r < rows; ++r) {
    apply_rope(rope, &a.q[r * qw], c.heads, hd, a.positions[r]);
    // The cache scales scores by 1/sqrt(head_dim); a model's own scale and its temperature by
    // position go into the queries.
    float scale = c.attention_scale != 0.0f ? c.attention_scale * std::sqrt(static_cast<float>(hd)) : 1.0f;
    if (c.attention_temperature_scale != 0.0f) {
      // whole periods, as llama.cpp floors them
      const int64_t periods = a.positions[r] / c.attention_temperature_floor;
      scale *= 1.0f + c.attention_temperature_scale * std::log(static_cast<float>(periods) + 1.0f);
    }
    if (scale != 1.0f)
      for (size_t i = 0; i < qw; ++i) a.q[r * qw + i] *= scale;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = observer ? Clock::now() : Clock::time_point{};
  for (const ForwardSegment& s : segments) {
    s.caches[l].append(TensorView::f32(&a.k[s.first_row * kvw], {s.n, c.kv_heads, hd}),
                       TensorView::f32(&a.v[s.first_row * kvw], {s.n, c.kv_heads, hd}),
                       std::span(&a.positions[s.first_row], s.n), rope);
  }
  const Clock::time_point appended = observer ? Clock::now() : Clock::time_point{};
  for (const ForwardSegment& s : segments)
    s.caches[l].attend_observed(TensorView::f32(&a.q[s.first_row * qw], {s.n, c.heads, hd}),
                                &a.attn[s.first_row * qw]);
  if (observer) {
    const auto seconds = [](Clock::duration t) { return std::chrono::duration<double>(t).count(); };
    observer->record(l, rows, a.k.data(), a.v.data(), a.positions, a.q.data(), a.attn.data(),
                     seconds(appended - start), seconds(Clock::now() - appended));
  }
  project(w.wo, {}, a.attn.data(), rows, a.proj.data());
  if (c.post_norms)
    for (size_t r = 0; r < rows; ++r)
      rms_norm(&a.proj[r * d], w.post_attn_norm.data(), d, c.rms_eps, &a.proj[r * d]);
  for (const ForwardSegment& s : segments)
    if (s.importance)
      (*s.importance)[l] = mean_cosine(&a.x[s.first_row * d], &a.proj[s.first_row * d], s.n, d);
  for (size_t i = 0; i < rows * d; ++i) a.x[i] += a.proj[i];

  for (size_t r = 0; r < rows; ++r) rms_norm(&a.x[r * d], w.ffn_norm.data(), d, c.rms_eps, &a.h[r * d]);
  project(w.gate, {}, a.h.data(), rows, a.gate.data());
  project(w.up, {}, a.h.data(), rows, a.up.data());
  gated(c.activation, a.gate.data(), a.up.data(), rows * c.feed_forward);
  project(w.down, {}, a.gate.data(), rows, a.proj.data());
  if (c.post_norms)
    for (size_t r = 0; r < rows; ++r)
      rms_norm(&a.proj[r * d], w.post_ffn_norm.data(), d, c.rms_eps, &a.proj[r * d]);
  for (size_t i = 0; i < rows * d; ++i) a.x[i] += a.proj[i];
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
