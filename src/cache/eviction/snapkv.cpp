// SnapKV (Li et al., NeurIPS 2024, arXiv 2404.14469): at the end of a prompt, the attention that
// the last `window` prompt queries pay to each earlier token, summed and smoothed by a max-pool
// so that neighbours of a selected token come along, picks the tokens each KV head keeps; the
// observation window itself is kept; tokens decoded afterwards are appended uncompressed. A
// prompt the runtime evaluates in several steps is held whole until its last step: the window's
// votes add up over the steps it spans, and the selection runs once, at the end.
// PyramidKV (Cai et al., arXiv 2406.02069) gives layers budgets that shrink linearly with depth at
// the same average; Ada-KV (Feng et al., arXiv 2407.11550) splits a layer's budget across its
// heads by taking the top scores of all heads together, each head guaranteed a floor.
#include <algorithm>
#include <cmath>
#include <functional>

#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

class SnapKv : public EvictionPolicy {
 public:
  SnapKv(size_t budget, size_t window, size_t kernel)
      : EvictionPolicy(budget), window_(window), kernel_(kernel) {}
  size_t protected_recent() const override { return window_; }
  // The prompt's last `window` queries; a step of one token outside a split prompt is decoding.
  size_t observed_queries(size_t nq, const PromptStep& step) const override {
    if (!step.split) return nq > 1 ? std::min(window_, nq) : 0;
    return step.rest >= window_ ? 0 : std::min(nq, window_ - step.rest);
  }
  bool evicts_after(size_t appended, const PromptStep& step) const override {
    return step.split ? step.rest == 0 : appended > 1;
  }
  void observe(const std::vector<std::vector<float>>& mass, std::vector<TokenScores>& heads,
               const PromptStep& step) override {
    if (mass.empty()) return;
    // Nothing is evicted between the steps of a split prompt, so stored token t is the same token
    // in every step's mass: the steps' votes add (a token appended later has none from before).
    const bool adds = voting_ && step.split;
    voting_ = step.split && step.rest > 0;
    votes_.resize(heads.size());
    const size_t half = kernel_ / 2;
    for (size_t h = 0; h < heads.size(); ++h) {
      std::vector<float>& m = votes_[h];
      if (!adds || mass[h].size() < m.size()) m.assign(mass[h].size(), 0.0f);
      m.resize(mass[h].size(), 0.0f);
      for (size_t t = 0; t < m.size(); ++t) m[t] += mass[h][t];
      std::vector<float>& score = heads[h].score;
      for (size_t t = 0; t < score.size(); ++t) {
        const size_t lo = t >= half ? t - half : 0, hi = std::min(score.size(), t + half + 1);
        score[t] = *std::max_element(m.begin() + static_cast<std::ptrdiff_t>(lo),
                                     m.begin() + static_cast<std::ptrdiff_t>(hi));
      }
    }
  }

 protected:
  size_t window_, kernel_;

 private:
  std::vector<std::vector<float>> votes_;  // per head, the window's summed attention so far
  bool voting_ = false;                    // the next step continues the prompt whose votes these are
};

class AdaKv final : public SnapKv {
 public:
  AdaKv(size_t budget, size_t window, size_t kernel, double floor)
      : SnapKv(budget, window, kernel), floor_(floor) {}
  // Every head keeps its window and a floor of its own best tokens; the rest of the layer's
  // budget goes to the best remaining tokens of any head.
  std::vector<size_t> head_budgets(const std::vector<TokenScores>& heads) const override {
    const size_t spare = budget_ > window_ ? budget_ - window_ : 0;
    const size_t floor = static_cast<size_t>(floor_ * static_cast<double>(spare));
    std::vector<size_t> budgets(heads.size(), window_ + floor);
    std::vector<std::pair<float, size_t>> rest;  // (score, head) beyond each head's floor
    for (size_t h = 0; h < heads.size(); ++h) {
      const std::vector<float>& s = heads[h].score;
      const size_t candidates = s.size() > window_ ? s.size() - window_ : 0;
      std::vector<float> sorted(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(candidates));
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      for (size_t i = std::min(floor, sorted.size()); i < sorted.size(); ++i) rest.emplace_back(sorted[i], h);
    }
    const size_t extra = std::min(rest.size(), heads.size() * (spare - floor));
    std::partial_sort(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(extra), rest.end(),
                      std::greater<>());
    for (size_t i = 0; i < extra; ++i) ++budgets[rest[i].second];
    return budgets;
  }

 private:
  double floor_;
};

ParamDef window_param() {
  return ParamDef::integer("window", 32, 1, 1024,
                           "observation window: the last prompt queries whose attention votes, kept");
}
ParamDef kernel_param() {
  return ParamDef::integer("kernel", 7, 1, 63, "max-pool width that smooths the votes over neighbours");
}

// budget, window and kernel, checked against each other.
struct SnapParams {
  size_t budget, window, kernel;
  explicit SnapParams(const Params& p, const char* method)
      : budget(static_cast<size_t>(p.get_int("budget"))),
        window(static_cast<size_t>(p.get_int("window"))),
        kernel(static_cast<size_t>(p.get_int("kernel"))) {
    if (window >= budget) {
      throw SpecError(std::string(method) + ": window=" + std::to_string(window) +
                      " leaves nothing to select in budget=" + std::to_string(budget) +
                      "; expected window < budget");
    }
  }
};

}  // namespace

MethodInfo snapkv_method() {
  return MethodInfo{
      "snapkv", "eviction", "Li et al., NeurIPS 2024, arXiv 2404.14469",
      "the prompt's observation window votes with its real attention, max-pooled, per KV head",
      {budget_param("tokens each KV head keeps of a prompt"), window_param(), kernel_param()},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        const SnapParams s(p, "snapkv");
        return std::make_unique<SnapKv>(s.budget, s.window, s.kernel);
      }};
}

MethodInfo pyramidkv_method() {
  return MethodInfo{
      "pyramidkv", "eviction", "Cai et al., arXiv 2406.02069",
      "SnapKV selection with budgets decreasing linearly with depth at a fixed average",
      {budget_param("tokens each KV head keeps of a prompt, on average over the layers"),
       window_param(), kernel_param(),
       ParamDef::integer("beta", 20, 2, 1000, "the last layer keeps budget/beta beyond the window")},
      nullptr,
      [](const Params& p, const LayerShape& shape) -> std::unique_ptr<EvictionPolicy> {
        const SnapParams s(p, "pyramidkv");
        // The paper's schedule on the selectable part: from 2*avg - min at the first layer down
        // to min = avg/beta at the last, linear in between.
        const double avg = static_cast<double>(s.budget - s.window);
        const double lo = avg / static_cast<double>(p.get_int("beta")), hi = 2 * avg - lo;
        const double depth = shape.layers > 1 ? static_cast<double>(shape.layer) / (shape.layers - 1) : 0.5;
        const size_t layer_budget = s.window + static_cast<size_t>(std::lround(hi - (hi - lo) * depth));
        return std::make_unique<SnapKv>(layer_budget, s.window, s.kernel);
      }};
}

MethodInfo adakv_method() {
  return MethodInfo{
      "adakv", "eviction", "Feng et al. (Ada-KV), arXiv 2407.11550",
      "one budget per layer split across its heads by the top SnapKV scores of all heads",
      {budget_param("tokens each KV head keeps of a prompt, on average over the layer's heads"),
       window_param(), kernel_param(),
       ParamDef::real("floor", 0.2, 0.0, 1.0, "share of each head's budget it keeps whatever the others score")},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        const SnapParams s(p, "adakv");
        return std::make_unique<AdaKv>(s.budget, s.window, s.kernel, p.get_float("floor"));
      }};
}

}  // namespace veloxquant
