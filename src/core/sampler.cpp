#include "veloxquant/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "veloxquant/error.h"

namespace veloxquant {

Sampler::Sampler(SamplerOptions options) : options_(options), engine_(options.seed) {
  check_sampler_options(options_);
}

void Sampler::accept(int32_t token) {
  if (options_.repeat_last_n == 0) return;
  recent_.push_back(token);
  if (recent_.size() > options_.repeat_last_n) recent_.pop_front();
}

SampleRequest Sampler::request() {
  SampleRequest r{options_, {}, 0.0};
  if (options_.repeat_penalty != 1.0f) {
    r.penalized.assign(recent_.begin(), recent_.end());
    std::sort(r.penalized.begin(), r.penalized.end());
    r.penalized.erase(std::unique(r.penalized.begin(), r.penalized.end()), r.penalized.end());
  }
  // A uniform in [0, 1) from the top 53 bits of one raw draw.
  if (options_.temperature != 0.0f) r.uniform = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return r;
}

int32_t Sampler::sample(std::span<const float> logits) {
  // Refused before request() takes a draw, so a bad call leaves the stream where it was.
  if (logits.empty()) throw Error("sample got no logits; expected one per vocabulary token");
  return pick(logits, request());
}

int32_t Sampler::pick(std::span<const float> logits, const SampleRequest& request) {
  if (logits.empty()) throw Error("sample got no logits; expected one per vocabulary token");
  const SamplerOptions& o = request.options;
  std::vector<std::pair<float, int32_t>> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {logits[i], static_cast<int32_t>(i)};
  // Repetition penalty (CTRL paper, as llama.cpp applies it): shrink positive logits, push
  // negative ones further down, once per distinct recent token.
  if (o.repeat_penalty != 1.0f) {
    for (int32_t t : request.penalized) {
      if (t < 0 || static_cast<size_t>(t) >= c.size()) continue;
      float& l = c[static_cast<size_t>(t)].first;
      l = l > 0 ? l / o.repeat_penalty : l * o.repeat_penalty;
    }
  }
  const auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (o.temperature == 0.0f) return std::min_element(c.begin(), c.end(), by_logit)->second;

  size_t keep = c.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(), by_logit);
  c.resize(keep);
  // top-p on the untempered distribution, then temperature, as in llama.cpp's chain.
  if (o.top_p < 1.0f) {
    double z = 0;
    for (const auto& [l, t] : c) z += std::exp(static_cast<double>(l - c[0].first));
    double mass = 0;
    size_t n = 0;
    while (n < c.size()) {
      mass += std::exp(static_cast<double>(c[n].first - c[0].first)) / z;
      ++n;
      if (mass >= o.top_p) break;
    }
    c.resize(n);
  }
  std::vector<double> weights(c.size());
  double total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    weights[i] = std::exp(static_cast<double>(c[i].first - c[0].first) / o.temperature);
    total += weights[i];
  }
  const double u = request.uniform * total;
  double acc = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    acc += weights[i];
    if (u < acc) return c[i].second;
  }
  return c.back().second;
}

}  // namespace veloxquant
