// KVzip (Kim et al., arXiv 2505.23416): query-agnostic eviction. After a prompt the model is made
// to re-read its context: an instruction to repeat the context, then the context itself, chunk by
// chunk, on a scratch copy of the prompt's full-precision cache (the session runs that pass,
// session.cpp). Each stored token is scored by the most attention any of those reconstruction
// queries (any query head of its KV head) paid it. As in the paper, the scores of every KV head
// of every layer are ranked together: the model keeps its best budget x heads x layers tokens,
// so heads that re-read the context (copying heads) keep more than heads that do not; with
// `uniform` each KV head keeps its `budget` best instead. Tokens the context needed to be reproduced are the
// ones any later question can need, so one compressed cache serves every question. Selection runs once per
// prompt, after its last step; decoded tokens are appended and kept. A later prompt re-scores every token the
// session holds.
#include <algorithm>
#include <limits>

#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

class KvZip final : public EvictionPolicy {
 public:
  explicit KvZip(size_t budget) : EvictionPolicy(budget) {}

  size_t observed_queries(size_t, const PromptStep&) const override { return 0; }
  bool evicts_after(size_t appended, const PromptStep& step) const override {
    return step.split ? step.rest == 0 : appended > 1;
  }
  bool scores_by_reconstruction() const override { return true; }
  void set_reconstruction_scores(std::vector<std::vector<float>> by_position,
                                 std::vector<size_t> head_budgets) override {
    by_position_ = std::move(by_position);
    head_budgets_ = std::move(head_budgets);
  }
  // Selection needs the scores: a cache driven without a session (no model to re-read the
  // context with) is refused rather than cut at random.
  std::vector<size_t> head_budgets(const std::vector<TokenScores>& heads) const override {
    if (by_position_.empty()) {
      throw Error("kvzip: no reconstruction scores to select with; kvzip runs in a Session (Session::eval "
                  "re-reads the prompt with the model before the cache selects), not on a KVCache alone");
    }
    return head_budgets_.size() == heads.size() ? head_budgets_ : EvictionPolicy::head_budgets(heads);
  }
  // A token the reconstruction did not see (appended since) keeps its place.
  void observe(const std::vector<std::vector<float>>&, std::vector<TokenScores>& heads,
               const PromptStep&) override {
    for (size_t h = 0; h < heads.size(); ++h) {
      const std::vector<float>* known = h < by_position_.size() ? &by_position_[h] : nullptr;
      for (size_t t = 0; t < heads[h].score.size(); ++t) {
        const auto p = static_cast<size_t>(heads[h].position[t]);
        heads[h].score[t] = known && p < known->size() ? (*known)[p] : std::numeric_limits<float>::max();
      }
    }
  }

 private:
  std::vector<std::vector<float>> by_position_;  // [kv head][position]
  std::vector<size_t> head_budgets_;
};

}  // namespace

MethodInfo kvzip_method() {
  return MethodInfo{
      "kvzip",
      "eviction",
      "Kim et al., KVzip: Query-Agnostic KV Cache Compression with Context Reconstruction, arXiv 2505.23416",
      "keeps the tokens the model attends to most while it re-reads its context after an instruction "
      "to repeat it: scores that do not depend on the question",
      {budget_param("tokens each KV head keeps of a prompt"),
       ParamDef::integer("chunk", 2048, 16, 1 << 20, "context tokens re-read per reconstruction pass"),
       ParamDef::boolean("uniform", false,
                         "every KV head keeps `budget` tokens (default: the budget of all heads and "
                         "layers goes to the best scores of any)")},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        return std::make_unique<KvZip>(static_cast<size_t>(p.get_int("budget")));
      }};
}

}  // namespace veloxquant
