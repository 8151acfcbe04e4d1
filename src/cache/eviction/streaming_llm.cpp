// StreamingLLM (Xiao et al., ICLR 2024, arXiv 2309.17453): the first few tokens, which soak up
// attention whatever they say (attention sinks), plus a rolling window of the newest ones.
//
// Positions inside the cache: the paper gives each kept token its cache index as position, so
// that the model never sees a distance longer than the cache. Under RoPE only distances matter;
// the window is contiguous and ends at the query, so its keys, rotated once at their own
// positions, are already at their cache distance. The sinks are not: they are stored before
// RoPE (exact, fp16) and rotated at every attend to sit just before the window (KVCache).
#include "cache/eviction/budget_param.h"
#include "cache/eviction/methods.h"
#include "cache/eviction/policy.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

class StreamingLlm final : public EvictionPolicy {
 public:
  StreamingLlm(size_t budget, size_t sinks) : EvictionPolicy(budget), sinks_(sinks) {}
  size_t sinks() const override { return sinks_; }
  size_t observed_queries(size_t, const PromptStep&) const override { return 0; }
  // Newest first: the window rolls.
  void observe(const std::vector<std::vector<float>>&, std::vector<TokenScores>& heads,
               const PromptStep&) override {
    for (TokenScores& h : heads)
      for (size_t t = 0; t < h.score.size(); ++t) h.score[t] = static_cast<float>(t);
  }

 private:
  size_t sinks_;
};

}  // namespace

MethodInfo streaming_llm_method() {
  MethodInfo m{
      "streaming_llm",
      "eviction",
      "Xiao et al., ICLR 2024, arXiv 2309.17453",
      "attention sinks plus a rolling window, re-positioned inside the cache: constant memory",
      {budget_param("tokens each KV head keeps: the sinks plus the window"),
       ParamDef::integer("sinks", 4, 0, 64, "first tokens kept for good (attention sinks)")},
      nullptr,
      [](const Params& p, const LayerShape&) -> std::unique_ptr<EvictionPolicy> {
        const size_t budget = static_cast<size_t>(p.get_int("budget"));
        const size_t sinks = static_cast<size_t>(p.get_int("sinks"));
        if (sinks >= budget) {
          throw SpecError("streaming_llm: sinks=" + std::to_string(sinks) + " leaves no window in budget=" +
                          std::to_string(budget) + "; expected sinks < budget");
        }
        return std::make_unique<StreamingLlm>(budget, sinks);
      }};
  // On the GPU the sinks are one more partial beside the quantizer's splits, and the window is
  // the newest of its codes (cuda::CacheConfig::budget); the factory above has checked the values.
  m.cuda_config = [](const Params& p, const LayerShape&, cuda::CacheConfig& c) {
    c.budget = static_cast<size_t>(p.get_int("budget"));
    c.sinks = static_cast<size_t>(p.get_int("sinks"));
    return std::string{};
  };
  m.cuda_attention =
      "the quantizer's attention on its newest codes, the sinks merged as one more split (a budget of "
      "at least the sinks, the quantizer's fp16 rows and one block; not over kvquant_nuq, whose keys "
      "stay before RoPE)";
  return m;
}

}  // namespace veloxquant
