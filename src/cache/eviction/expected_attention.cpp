// Expected Attention (Devoto et al., arXiv 2510.00636): at the end of a prompt, each token is
// scored by the attention that future queries are expected to pay it, in closed form. The
// prompt's queries, taken back before RoPE, give each query head a mean mu and covariance S;
// the rotations of the next `future` positions, averaged into one matrix R, carry them to where
// the coming queries will sit (mu' = R mu, S' = R S R^T). For Gaussian queries
// E[exp(q.k / sqrt(d))] = exp(mu'.k / sqrt(d) + k^T S' k / (2d)), which a softmax over the head's
// tokens turns into expected attention; it is averaged over the query heads of a KV head and
// weighted by the token's value norm (what it adds to the output). The first `sink` tokens are
// left out of the statistics and always kept, as attention sinks. Selection runs once per prompt,
// after its last step; decoded tokens are appended and kept, and their queries not counted. A
// later prompt (a conversation's next turn) selects with the statistics of every prompt so far.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"

namespace veloxquant {
namespace {

// The two coordinates that pair i of a head rotates together.
std::pair<size_t, size_t> rope_pair(const RopeParams& rope, size_t i) {
  return rope.layout == RopeLayout::Neox ? std::pair{i, i + rope.dims / 2} : std::pair{2 * i, 2 * i + 1};
}

class ExpectedAttention final : public EvictionPolicy {
 public:
  ExpectedAttention(size_t budget, const LayerShape& shape, size_t future, size_t sink, bool covariance,
                    bool value_norm)
      : EvictionPolicy(budget),
        d_(shape.head_dim),
        kv_heads_(shape.kv_heads),
        future_(future),
        sink_(sink),
        covariance_(covariance),
        value_norm_(value_norm) {}

  size_t observed_queries(size_t, const PromptStep&) const override { return 0; }
  void observe(const std::vector<std::vector<float>>&, std::vector<TokenScores>&,
               const PromptStep&) override {}
  bool evicts_after(size_t appended, const PromptStep& step) const override {
    return step.split ? step.rest == 0 : appended > 1;
  }
  bool reads_contents() const override { return true; }

  void observe_queries(const float* q, size_t nq, size_t q_heads, const int64_t* positions,
                       const RopeParams& rope) override {
    if (nq < 2) return;  // a decoded token: only prompts are compressed, from their own queries
    if (heads_.empty()) heads_.assign(q_heads, Moments(d_));
    std::vector<double> x(d_);
    for (size_t t = 0; t < nq; ++t) {
      if (positions[t] < static_cast<int64_t>(sink_)) continue;  // sinks' queries are outliers
      for (size_t h = 0; h < q_heads; ++h) {
        const float* row = q + (t * q_heads + h) * d_;
        std::copy_n(row, d_, x.begin());
        unrotate(rope, positions[t], x);
        heads_[h].add(x, covariance_);
      }
    }
  }

  void score_contents(size_t head, const float* keys, const float* values, size_t n, int64_t next_position,
                      const RopeParams& rope, std::vector<float>& score) override {
    const size_t group = heads_.size() / kv_heads_;  // 0 before any query: every token scores 0
    std::vector<double> total(n, 0.0), z(n);
    for (size_t g = 0; g < group; ++g) {
      const Moments& m = heads_[head * group + g];
      if (m.count == 0) continue;
      std::vector<double> mu(d_), cov;
      for (size_t i = 0; i < d_; ++i) mu[i] = m.sum[i] / m.count;
      if (covariance_) {
        cov.resize(d_ * d_);
        for (size_t i = 0; i < d_; ++i)
          for (size_t j = 0; j < d_; ++j) cov[i * d_ + j] = m.outer[i * d_ + j] / m.count - mu[i] * mu[j];
      }
      rotate_to_future(rope, next_position, mu, cov);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d_));
      double top = -std::numeric_limits<double>::infinity();
      for (size_t t = sink_; t < n; ++t) {
        const float* k = keys + t * d_;
        double s = 0;
        for (size_t i = 0; i < d_; ++i) s += mu[i] * k[i];
        s *= scale;
        if (covariance_) {
          double quad = 0;
          for (size_t i = 0; i < d_; ++i) {
            double row = 0;
            for (size_t j = 0; j < d_; ++j) row += cov[i * d_ + j] * k[j];
            quad += k[i] * row;
          }
          s += quad / (2.0 * static_cast<double>(d_));
        }
        z[t] = s;
        top = std::max(top, s);
      }
      double sum = 0;
      for (size_t t = sink_; t < n; ++t) sum += (z[t] = std::exp(z[t] - top));
      for (size_t t = sink_; t < n; ++t) total[t] += z[t] / sum / static_cast<double>(group);
    }
    score.assign(n, 0.0f);
    for (size_t t = sink_; t < n; ++t) {
      double weight = total[t];
      if (value_norm_) {
        double norm = 0;
        for (size_t i = 0; i < d_; ++i) norm += static_cast<double>(values[t * d_ + i]) * values[t * d_ + i];
        weight *= std::sqrt(norm);
      }
      score[t] = static_cast<float>(weight);
    }
    for (size_t t = 0; t < std::min(sink_, n); ++t) score[t] = std::numeric_limits<float>::max();
  }

 private:
  // Running first and second moments of one query head's pre-RoPE queries, in double.
  struct Moments {
    explicit Moments(size_t d) : sum(d, 0.0), outer(d * d, 0.0) {}
    std::vector<double> sum, outer;
    double count = 0;
    void add(const std::vector<double>& x, bool with_outer) {
      const size_t d = sum.size();
      for (size_t i = 0; i < d; ++i) sum[i] += x[i];
      if (with_outer)
        for (size_t i = 0; i < d; ++i)
          for (size_t j = 0; j < d; ++j) outer[i * d + j] += x[i] * x[j];
      count += 1;
    }
  };

  // Takes a query rotated to `position` back to before RoPE (and YaRN's magnitude).
  void unrotate(const RopeParams& rope, int64_t position, std::vector<double>& x) const {
    for (size_t i = 0; i < rope.dims / 2; ++i) {
      const double angle = static_cast<double>(position) * rope_inverse_frequency(rope, i);
      const double c = std::cos(angle) / rope.magnitude, s = std::sin(angle) / rope.magnitude;
      const auto [a, b] = rope_pair(rope, i);
      const double xa = x[a], xb = x[b];
      x[a] = c * xa + s * xb;
      x[b] = -s * xa + c * xb;
    }
  }

  // mu <- R mu and cov <- R cov R^T, R the mean over the next `future` positions of each pair's
  // rotation [[cos, -sin], [sin, cos]] (times the magnitude): a block-diagonal matrix.
  void rotate_to_future(const RopeParams& rope, int64_t next_position, std::vector<double>& mu,
                        std::vector<double>& cov) const {
    const size_t pairs = rope.dims / 2;
    std::vector<double> r(d_ * d_, 0.0);  // R, dense for the covariance's product
    for (size_t i = 0; i < d_; ++i) r[i * d_ + i] = 1.0;
    for (size_t i = 0; i < pairs; ++i) {
      double c = 0, s = 0;
      for (size_t f = 0; f < future_; ++f) {
        const double angle = static_cast<double>(next_position + static_cast<int64_t>(f)) *
                             rope_inverse_frequency(rope, i);
        c += std::cos(angle);
        s += std::sin(angle);
      }
      c *= rope.magnitude / static_cast<double>(future_);
      s *= rope.magnitude / static_cast<double>(future_);
      const auto [a, b] = rope_pair(rope, i);
      r[a * d_ + a] = c;
      r[a * d_ + b] = -s;
      r[b * d_ + a] = s;
      r[b * d_ + b] = c;
    }
    std::vector<double> rotated(d_, 0.0);
    for (size_t i = 0; i < d_; ++i)
      for (size_t j = 0; j < d_; ++j) rotated[i] += r[i * d_ + j] * mu[j];
    mu = rotated;
    if (cov.empty()) return;
    std::vector<double> rc(d_ * d_, 0.0), out(d_ * d_, 0.0);
    for (size_t i = 0; i < d_; ++i)
      for (size_t k = 0; k < d_; ++k)
        for (size_t j = 0; j < d_; ++j) rc[i * d_ + j] += r[i * d_ + k] * cov[k * d_ + j];
    for (size_t i = 0; i < d_; ++i)
      for (size_t k = 0; k < d_; ++k)
        for (size_t j = 0; j < d_; ++j) out[i * d_ + j] += rc[i * d_ + k] * r[j * d_ + k];
    cov = out;
  }

  size_t d_, kv_heads_, future_, sink_;
  bool covariance_, value_norm_;
  std::vector<Moments> heads_;  // per query head
};

}  // namespace

MethodInfo expected_attention_method() {
  return MethodInfo{
      "expected_attention",
      "eviction",
      "Devoto et al., arXiv 2510.00636",
      "keeps the tokens future queries are expected to attend to, in closed form from the prompt's "
      "query statistics, weighted by value norm",
      {budget_param("tokens each KV head keeps of a prompt"),
       ParamDef::integer("future", 512, 1, 1 << 20, "future positions whose RoPE rotations are averaged"),
       ParamDef::integer("sink", 4, 0, 1024, "first tokens always kept and left out of the query statistics"),
       ParamDef::boolean("covariance", true, "add the queries' covariance term k^T S k / 2d"),
       ParamDef::boolean("vnorm", true, "weight each token's expected attention by its value norm")},
      nullptr,
      [](const Params& p, const LayerShape& shape) -> std::unique_ptr<EvictionPolicy> {
        return std::make_unique<ExpectedAttention>(static_cast<size_t>(p.get_int("budget")), shape,
                                                   static_cast<size_t>(p.get_int("future")),
                                                   static_cast<size_t>(p.get_int("sink")),
                                                   p.get_bool("covariance"), p.get_bool("vnorm"));
      }};
}

}  // namespace veloxquant
