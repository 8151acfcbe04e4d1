#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "veloxquant/error.h"
#include "veloxquant/observer.h"

namespace veloxquant {

CacheObserver::CacheObserver(size_t layers, size_t kv_heads, size_t q_heads, size_t head_dim, RopeParams rope,
                             size_t sink_tokens)
    : kv_heads_(kv_heads), q_heads_(q_heads), head_dim_(head_dim), sink_tokens_(sink_tokens), rope_(rope) {
  if (layers == 0 || kv_heads == 0 || head_dim == 0 || q_heads % kv_heads != 0) {
    throw Error(fmt::format("observer shape: {} layers, {} KV heads, {} query heads, head_dim {}; expected "
                            "positive sizes and query heads a multiple of KV heads",
                            layers, kv_heads, q_heads, head_dim));
  }
  layers_.resize(layers);
  reset();
}

void CacheObserver::reset() {
  for (Layer& l : layers_) {
    l = Layer{};
    for (auto* v : {&l.err_sq, &l.ref_sq, &l.sink_sum, &l.norm_sum, &l.norm_max}) v->assign(kv_heads_, 0.0);
    l.sink_queries.assign(kv_heads_, 0);
  }
}

void CacheObserver::record(size_t layer, size_t n, const float* keys, const float* values,
                           std::span<const int64_t> positions, const float* queries, const float* output,
                           double encode_seconds, double attend_seconds) {
  Layer& l = layers_.at(layer);
  const size_t hd = head_dim_, row = kv_heads_ * hd, before = l.keys.size() / row;
  l.encode_seconds += encode_seconds;
  l.attend_seconds += attend_seconds;
  l.keys.insert(l.keys.end(), keys, keys + n * row);
  l.values.insert(l.values.end(), values, values + n * row);
  for (size_t t = 0; t < n; ++t) {
    float* k = &l.keys[(before + t) * row];
    for (size_t h = 0; h < kv_heads_; ++h) {
      double sq = 0;
      for (size_t i = 0; i < hd; ++i) sq += static_cast<double>(k[h * hd + i]) * k[h * hd + i];
      l.norm_sum[h] += std::sqrt(sq);
      l.norm_max[h] = std::max(l.norm_max[h], std::sqrt(sq));
    }
    apply_rope(rope_, k, kv_heads_, hd, positions[t]);  // norms are the same before and after
  }
  // Exact causal softmax attention in double: query t sees tokens [0, before + t].
  const size_t group = q_heads_ / kv_heads_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> p, exact(hd);
  for (size_t t = 0; t < n; ++t) {
    const size_t seen = before + t + 1;
    p.resize(seen);
    for (size_t qh = 0; qh < q_heads_; ++qh) {
      const size_t h = qh / group;
      const float* q = &queries[(t * q_heads_ + qh) * hd];
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < seen; ++j) {
        const float* k = &l.keys[j * row + h * hd];
        double s = 0;
        for (size_t i = 0; i < hd; ++i) s += static_cast<double>(q[i]) * k[i];
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      double z = 0;
      for (double& x : p) z += (x = std::exp(x - mx));
      std::fill(exact.begin(), exact.end(), 0.0);
      for (size_t j = 0; j < seen; ++j) {
        const float* v = &l.values[j * row + h * hd];
        for (size_t i = 0; i < hd; ++i) exact[i] += p[j] / z * v[i];
      }
      const float* out = &output[(t * q_heads_ + qh) * hd];
      for (size_t i = 0; i < hd; ++i) {
        l.err_sq[h] += (out[i] - exact[i]) * (out[i] - exact[i]);
        l.ref_sq[h] += exact[i] * exact[i];
      }
      if (seen > sink_tokens_) {
        double sink = 0;
        for (size_t j = 0; j < sink_tokens_; ++j) sink += p[j] / z;
        l.sink_sum[h] += sink;
        ++l.sink_queries[h];
      }
    }
  }
}

namespace {

// Relative L2 error of the decoded rows of one KV head against the exact rows at their positions.
double head_error(const std::vector<float>& decoded, const std::vector<float>& exact, const std::vector<int64_t>& pos,
                  size_t kv_heads, size_t h, size_t hd) {
  const size_t row = kv_heads * hd, tokens = exact.size() / row;
  double err = 0, ref = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    if (pos[i] < 0 || static_cast<size_t>(pos[i]) >= tokens) return std::numeric_limits<double>::quiet_NaN();
    const float* d = &decoded[i * row + h * hd];
    const float* e = &exact[static_cast<size_t>(pos[i]) * row + h * hd];
    for (size_t j = 0; j < hd; ++j) {
      err += (static_cast<double>(d[j]) - e[j]) * (static_cast<double>(d[j]) - e[j]);
      ref += static_cast<double>(e[j]) * e[j];
    }
  }
  return ref > 0 ? std::sqrt(err / ref) : 0.0;
}

}  // namespace

std::vector<LayerObservation> CacheObserver::report(std::span<const KVCache> caches) const {
  if (caches.size() != layers_.size()) {
    throw Error(fmt::format("observer report: {} caches for {} observed layers; expected one per layer",
                            caches.size(), layers_.size()));
  }
  std::vector<LayerObservation> out;
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& l = layers_[li];
    const KVCache& cache = caches[li];
    if (cache.kv_heads() != kv_heads_ || cache.head_dim() != head_dim_) {
      throw Error(fmt::format("observer report: layer {} caches {} KV heads of {}; expected {} of {}", li,
                              cache.kv_heads(), cache.head_dim(), kv_heads_, head_dim_));
    }
    LayerObservation o;
    o.layer = li;
    o.key_bytes = cache.key_bytes();
    o.value_bytes = cache.value_bytes();
    o.fp16_bytes = cache.fp16_bytes();
    o.encode_seconds = l.encode_seconds;
    o.attend_seconds = l.attend_seconds;
    // An evicting cache whose heads hold different token counts cannot decode as one tensor.
    std::vector<float> keys, values;
    bool decoded = true;
    try {
      keys = cache.decode_keys();
      values = cache.decode_values();
    } catch (const Error&) {
      decoded = false;
    }
    const size_t tokens = l.keys.size() / (kv_heads_ * head_dim_);
    for (size_t h = 0; h < kv_heads_; ++h) {
      HeadObservation ho;
      ho.layer = li;
      ho.kv_head = h;
      ho.stored_tokens = cache.stored_tokens(h);
      const std::vector<int64_t> pos = cache.positions(h);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      ho.key_error = decoded ? head_error(keys, l.keys, pos, kv_heads_, h, head_dim_) : nan;
      ho.value_error = decoded ? head_error(values, l.values, pos, kv_heads_, h, head_dim_) : nan;
      ho.attention_error = l.ref_sq[h] > 0 ? std::sqrt(l.err_sq[h] / l.ref_sq[h]) : 0.0;
      ho.key_norm_mean = tokens ? l.norm_sum[h] / static_cast<double>(tokens) : 0.0;
      ho.key_norm_max = l.norm_max[h];
      ho.sink_mass = l.sink_queries[h] ? l.sink_sum[h] / static_cast<double>(l.sink_queries[h]) : 0.0;
      o.heads.push_back(ho);
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::string observations_json(const std::vector<LayerObservation>& layers) {
  // NaN is not JSON: an error that could not be measured is null.
  auto number = [](double x) { return std::isnan(x) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(x); };
  nlohmann::ordered_json j;
  j["layers"] = nlohmann::ordered_json::array();
  for (const LayerObservation& l : layers) {
    nlohmann::ordered_json heads = nlohmann::ordered_json::array();
    for (const HeadObservation& h : l.heads) {
      heads.push_back({{"kv_head", h.kv_head},
                       {"stored_tokens", h.stored_tokens},
                       {"key_error", number(h.key_error)},
                       {"value_error", number(h.value_error)},
                       {"attention_error", h.attention_error},
                       {"key_norm_mean", h.key_norm_mean},
                       {"key_norm_max", h.key_norm_max},
                       {"sink_mass", h.sink_mass}});
    }
    j["layers"].push_back({{"layer", l.layer},
                           {"key_bytes", l.key_bytes},
                           {"value_bytes", l.value_bytes},
                           {"fp16_bytes", l.fp16_bytes},
                           {"encode_seconds", l.encode_seconds},
                           {"attend_seconds", l.attend_seconds},
                           {"heads", heads}});
  }
  return j.dump(2) + "\n";
}

}  // namespace veloxquant
