// TOVA (Oren et al., EMNLP 2024, arXiv 2401.06104): when over budget, drop the token the current
// query attends to least, attention averaged over the heads of the layer, so every head of a
// layer keeps the same tokens.
#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"

namespace veloxquant {
namespace {

class Tova final : public EvictionPolicy {
 public:
  using EvictionPolicy::EvictionPolicy;
  size_t observed_queries(size_t, const PromptStep&) const override { return 1; }
  void observe(const std::vector<std::vector<float>>& mass, std::vector<TokenScores>& heads,
               const PromptStep&) override {
    if (mass.empty()) return;
    const size_t n = heads.front().score.size();
    for (size_t t = 0; t < n; ++t) {
      float sum = 0;
      for (const auto& m : mass) sum += m[t];
      for (TokenScores& h : heads) h.score[t] = sum / static_cast<float>(mass.size());
    }
  }
};

}  // namespace

MethodInfo tova_method() {
  return MethodInfo{
      "tova", "eviction", "Oren et al., EMNLP 2024, arXiv 2401.06104",
      "evicts the token with the lowest current-step attention, averaged over the layer's heads",
      {budget_param()},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        return std::make_unique<Tova>(static_cast<size_t>(p.get_int("budget")));
      }};
}

}  // namespace veloxquant
