#include "eval/kv_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

KVBenchResult run_kv_bench(const std::string& spec_text, const KVBenchOptions& opt) {
  if (opt.tokens == 0 || opt.kv_heads == 0 || opt.head_dim == 0 || opt.q_per_kv == 0) {
    throw ShapeError("bench workload tokens=" + std::to_string(opt.tokens) + " heads=" +
                     std::to_string(opt.kv_heads) + " head_dim=" + std::to_string(opt.head_dim) +
                     "; expected all >= 1");
  }
  const Spec spec = parse_spec(spec_text);
  const size_t q_tokens = std::min(opt.q_tokens, opt.tokens);
  const SyntheticKV w =
      make_synthetic_kv(opt.tokens, opt.kv_heads, opt.head_dim, opt.q_per_kv, q_tokens, opt.seed);
  // A calibrated method is fitted to the workload's own statistics (its seed): in sample, as a
  // synthetic workload has no other text from the same "model".
  const LayerShape shape = with_synthetic_calibration(spec, {opt.kv_heads, opt.head_dim, 0, opt.seed}, opt.seed);
  KVCache cache(spec, shape);
  const size_t row = opt.kv_heads * opt.head_dim;

  const auto t0 = Clock::now();
  for (size_t t = 0; t < opt.tokens; t += opt.append_chunk) {
    const size_t n = std::min(opt.append_chunk, opt.tokens - t);
    cache.append(TensorView::f32(w.keys.data() + t * row, {n, opt.kv_heads, opt.head_dim}),
                 TensorView::f32(w.values.data() + t * row, {n, opt.kv_heads, opt.head_dim}));
  }
  const double encode_s = seconds_since(t0);

  KVBenchResult r;
  r.method = spec.method->name;
  r.spec = spec.to_string();
  r.fp16_bytes = cache.fp16_bytes();
  r.k_bytes = cache.key_bytes();
  r.v_bytes = cache.value_bytes();
  r.compression_ratio = static_cast<double>(r.fp16_bytes) / static_cast<double>(cache.bytes());
  r.encode_tokens_per_s = static_cast<double>(opt.tokens) / encode_s;

  const std::vector<float> kd = cache.decode_keys(), vd = cache.decode_values();
  double kerr = 0, verr = 0, cos_sum = 0;
  for (size_t i = 0; i < kd.size(); ++i) {
    kerr += (kd[i] - w.keys[i]) * static_cast<double>(kd[i] - w.keys[i]);
    verr += (vd[i] - w.values[i]) * static_cast<double>(vd[i] - w.values[i]);
  }
  const size_t vectors = opt.tokens * opt.kv_heads;
  for (size_t i = 0; i < vectors; ++i) {
    double dot = 0, na = 0, nb = 0;
    for (size_t c = 0; c < opt.head_dim; ++c) {
      const double a = kd[i * opt.head_dim + c], b = w.keys[i * opt.head_dim + c];
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    cos_sum += (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
  }
  r.key_mse = kerr / static_cast<double>(kd.size());
  r.value_mse = verr / static_cast<double>(vd.size());
  r.key_cosine = cos_sum / static_cast<double>(vectors);

  const size_t qh = w.q_heads, d = opt.head_dim;
  std::vector<float> out(q_tokens * qh * d);
  cache.attend(TensorView::f32(w.queries.data(), {q_tokens, qh, d}), out.data());
  const std::vector<float> exact = exact_attention(w.queries.data(), q_tokens, qh, w.keys.data(),
                                                   w.values.data(), opt.tokens, opt.kv_heads, d);
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    num += (out[i] - exact[i]) * static_cast<double>(out[i] - exact[i]);
    den += exact[i] * static_cast<double>(exact[i]);
  }
  r.attn_rel_err = std::sqrt(num / den);

  // Decode step: one query token (the last) against the whole cache; median of repeated runs.
  const float* last = w.queries.data() + (q_tokens - 1) * qh * d;
  std::vector<double> times;
  const auto budget = Clock::now();
  for (int rep = 0; rep < 25 && (rep < 3 || seconds_since(budget) < 1.0); ++rep) {
    const auto s = Clock::now();
    cache.attend(TensorView::f32(last, {1, qh, d}), out.data());
    times.push_back(seconds_since(s));
  }
  r.attend_tokens_per_s = static_cast<double>(opt.tokens) / median(times);
  return r;
}

}  // namespace veloxquant
