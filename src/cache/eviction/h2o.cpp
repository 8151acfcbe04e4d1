// H2O (Zhang et al., NeurIPS 2023, arXiv 2306.14048): heavy hitters, the tokens with the largest
// attention accumulated over every query so far, plus the most recent tokens, under one budget.
// SqueezeAttention (Wang et al., arXiv 2404.04793) keeps H2O's choice within a layer and moves
// budget between layers by how much each attention block changes the hidden state
// (squeeze_budgets.h); the runtime measures that and sets each layer's budget.
#include <cmath>

#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

class HeavyHitters : public EvictionPolicy {
 public:
  HeavyHitters(size_t budget, double recent_share, bool by_layer_importance)
      : EvictionPolicy(budget), recent_share_(recent_share), by_layer_importance_(by_layer_importance) {}
  size_t protected_recent() const override {
    return static_cast<size_t>(std::floor(recent_share_ * static_cast<double>(budget_)));
  }
  size_t observed_queries(size_t nq, const PromptStep&) const override { return nq; }
  void observe(const std::vector<std::vector<float>>& mass, std::vector<TokenScores>& heads,
               const PromptStep&) override {
    for (size_t h = 0; h < heads.size(); ++h)
      for (size_t t = 0; t < heads[h].score.size(); ++t) heads[h].score[t] += mass[h][t];
  }
  bool wants_layer_importance() const override { return by_layer_importance_; }

 private:
  double recent_share_;
  bool by_layer_importance_;
};

ParamDef recent_param() {
  return ParamDef::real("recent", 0.5, 0.0, 0.9,
                        "share of the budget kept for the newest tokens; the rest holds heavy hitters");
}

}  // namespace

MethodInfo h2o_method() {
  return MethodInfo{
      "h2o", "eviction", "Zhang et al., NeurIPS 2023, arXiv 2306.14048",
      "heavy hitters by cumulative attention from the real queries plus a recent window",
      {budget_param(), recent_param()},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        return std::make_unique<HeavyHitters>(static_cast<size_t>(p.get_int("budget")),
                                              p.get_float("recent"), false);
      }};
}

MethodInfo squeeze_method() {
  return MethodInfo{
      "squeeze", "eviction", "Wang et al. (SqueezeAttention), arXiv 2404.04793",
      "per-layer budgets from measured layer importance, H2O selection within each layer",
      {budget_param("tokens each KV head keeps on average over the layers"), recent_param(),
       ParamDef::real("p", 0.5, 0.05, 1.0,
                      "budget share left to the least important group of layers")},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        return std::make_unique<HeavyHitters>(static_cast<size_t>(p.get_int("budget")),
                                              p.get_float("recent"), true);
      }};
}

}  // namespace veloxquant
