#include "eval/synthetic_kv.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "veloxquant/calibration.h"

namespace veloxquant {
namespace {
double student_t3(Rng& rng) {
  // t = z / sqrt(chi2_3 / 3)
  const double z = rng.normal();
  double chi = 0;
  for (int i = 0; i < 3; ++i) {
    const double g = rng.normal();
    chi += g * g;
  }
  return z / std::sqrt(chi / 3.0);
}
}  // namespace

SyntheticKV make_synthetic_kv(size_t tokens, size_t kv_heads, size_t head_dim, size_t q_per_kv,
                              size_t q_tokens, uint64_t seed) {
  SyntheticKV w;
  w.tokens = tokens;
  w.kv_heads = kv_heads;
  w.head_dim = head_dim;
  w.q_tokens = q_tokens;
  w.q_heads = kv_heads * q_per_kv;
  const size_t d = head_dim;
  w.keys.resize(tokens * kv_heads * d);
  w.values.resize(tokens * kv_heads * d);
  w.queries.resize(q_tokens * w.q_heads * d);
  Rng rng(seed);
  for (size_t h = 0; h < kv_heads; ++h) {
    // Per-channel offset and scale; about 3% of channels (at least 2) are outliers, 8x larger.
    std::vector<double> mean(d), scale(d), sink(d), qdir(d);
    const size_t outliers = std::max<size_t>(2, d * 3 / 100);
    for (size_t c = 0; c < d; ++c) {
      mean[c] = 0.3 * rng.normal();
      scale[c] = std::exp(0.3 * rng.normal());
    }
    for (size_t o = 0; o < outliers; ++o) {
      const size_t c = static_cast<size_t>(rng.next_u64() % d);
      scale[c] *= 8.0;
      mean[c] += 4.0 * rng.sign();
    }
    double qn = 0;
    for (size_t c = 0; c < d; ++c) {
      qdir[c] = rng.normal();
      qn += qdir[c] * qdir[c];
    }
    for (size_t c = 0; c < d; ++c) qdir[c] /= std::sqrt(qn);
    for (size_t t = 0; t < tokens; ++t) {
      float* k = &w.keys[(t * kv_heads + h) * d];
      float* v = &w.values[(t * kv_heads + h) * d];
      for (size_t c = 0; c < d; ++c) {
        k[c] = static_cast<float>(mean[c] + scale[c] * rng.normal());
        v[c] = static_cast<float>(0.5 * student_t3(rng));
      }
      if (t == 0) {  // the sink: a large key along the query direction, a small value
        for (size_t c = 0; c < d; ++c) {
          k[c] = static_cast<float>(mean[c] + 3.0 * std::sqrt(static_cast<double>(d)) * qdir[c]);
          v[c] *= 0.1f;
        }
      }
    }
    // Queries: the shared direction (so the sink draws attention) plus a random key's direction
    // (so some ordinary tokens matter too) plus noise.
    for (size_t i = 0; i < q_tokens; ++i) {
      for (size_t g = 0; g < q_per_kv; ++g) {
        float* q = &w.queries[(i * w.q_heads + h * q_per_kv + g) * d];
        const size_t target = 1 + static_cast<size_t>(rng.next_u64() % (tokens > 1 ? tokens - 1 : 1));
        const float* kt = &w.keys[((target < tokens ? target : 0) * kv_heads + h) * d];
        for (size_t c = 0; c < d; ++c) {
          q[c] = static_cast<float>(1.5 * qdir[c] + 0.2 * (kt[c] - mean[c]) + 0.3 * rng.normal());
        }
      }
    }
  }
  return w;
}

std::vector<float> exact_attention(const float* q, size_t nq, size_t q_heads, const float* k,
                                   const float* v, size_t tokens, size_t kv_heads, size_t head_dim) {
  const size_t d = head_dim, group = q_heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> out(nq * q_heads * d);
  std::vector<double> s(tokens), acc(d);
  for (size_t i = 0; i < nq; ++i) {
    const size_t visible = tokens - nq + i + 1;
    for (size_t qh = 0; qh < q_heads; ++qh) {
      const size_t h = qh / group;
      const float* qi = q + (i * q_heads + qh) * d;
      double mx = -1e300;
      for (size_t t = 0; t < visible; ++t) {
        double dot = 0;
        const float* kt = k + (t * kv_heads + h) * d;
        for (size_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kt[c];
        s[t] = dot * scale;
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (size_t t = 0; t < visible; ++t) sum += (s[t] = std::exp(s[t] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t t = 0; t < visible; ++t) {
        const float* vt = v + (t * kv_heads + h) * d;
        for (size_t c = 0; c < d; ++c) acc[c] += s[t] / sum * vt[c];
      }
      for (size_t c = 0; c < d; ++c) out[(i * q_heads + qh) * d + c] = static_cast<float>(acc[c]);
    }
  }
  return out;
}

LayerShape with_synthetic_calibration(const Spec& spec, LayerShape shape, uint64_t seed) {
  if (!spec.method->calibrated() || shape.calibration || !spec.params.get_text("artifacts").empty()) {
    return shape;
  }
  constexpr size_t kTokens = 2048;
  const SyntheticKV w = make_synthetic_kv(kTokens, shape.kv_heads, shape.head_dim, 1, 1, seed);
  const CalibrationSamples samples{w.keys, w.values, kTokens, shape.kv_heads, shape.head_dim, 0};
  shape.calibration = calibrate_on_samples(spec, samples, shape.layers);
  return shape;
}

}  // namespace veloxquant
