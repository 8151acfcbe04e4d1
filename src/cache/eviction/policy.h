// An eviction policy decides which tokens a layer's cache keeps. The cache owns storage and
// attention; after each attend it hands the policy the attention the queries actually paid to
// every stored token, and after each forward step it asks for budgets and drops what scores
// lowest (select.h). Policies differ only in how they score, what they protect and when.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "veloxquant/rope.h"

namespace veloxquant {

// Per KV head, one entry per stored token in storage order (sinks first, then oldest to newest).
struct TokenScores {
  std::vector<float> score;       // higher is kept first
  std::vector<int64_t> position;  // the token's position in the sequence
};

// Where a forward step sits in its prompt. The runtime cuts a long prompt into several steps
// (micro-batches, KVCache::continue_prompt): `rest` of its tokens come in the steps after this one,
// 0 on its last. A step that is a whole prompt, or a decoded token, is not split.
struct PromptStep {
  bool split = false;
  size_t rest = 0;
};

class EvictionPolicy {
 public:
  explicit EvictionPolicy(size_t budget) : budget_(budget) {}
  virtual ~EvictionPolicy() = default;

  // Tokens each KV head keeps after a step (the average over heads for adakv, the layer's share
  // for pyramidkv and squeeze).
  size_t budget() const { return budget_; }
  void set_budget(size_t tokens) { budget_ = tokens; }

  // The first tokens of the sequence, kept exact before RoPE and re-positioned at every attend
  // (streaming_llm's attention sinks); 0 for every other policy.
  virtual size_t sinks() const { return 0; }
  // The newest tokens, always kept (a recent window, SnapKV's observation window).
  virtual size_t protected_recent() const { return 0; }
  // Of an attend call with nq query tokens in `step`, how many of the last ones must report the
  // attention they paid (0: the policy needs no attention).
  virtual size_t observed_queries(size_t nq, const PromptStep& step) const = 0;
  // Folds one attend call of `step` into the scores. mass[h][t]: attention probability that the
  // observed queries of KV head h's query heads paid to stored token t, summed; empty when
  // observed_queries() was 0. Entries of tokens appended since the last call start at 0.
  virtual void observe(const std::vector<std::vector<float>>& mass, std::vector<TokenScores>& heads,
                       const PromptStep& step) = 0;
  // Whether a forward step that appended `appended` tokens ends by enforcing the budget
  // (SnapKV compresses whole prompts, never decoded tokens).
  virtual bool evicts_after(size_t /*appended*/, const PromptStep& /*step*/) const { return true; }
  // Tokens each head may keep now; by default budget() for every head.
  virtual std::vector<size_t> head_budgets(const std::vector<TokenScores>& heads) const {
    return std::vector<size_t>(heads.size(), budget_);
  }
  // The layer's budget comes from measured layer importance (squeeze): the runtime measures it on
  // the first forward step and sets every layer's budget before the first eviction.
  virtual bool wants_layer_importance() const { return false; }

  // A policy that scores tokens by their contents (expected_attention) rather than by the
  // attention paid so far: it sees every attend call's queries ([nq, q_heads, head_dim], as
  // attended, i.e. rotated to `positions` by `rope`), and before a selection it scores each head's
  // stored tokens from their keys (rotated to their positions) and values, [n, head_dim] each, in
  // storage order; `next_position` is where the next token will sit.
  // A policy that scores tokens by a reconstruction pass the session runs before the prompt
  // (kvzip): the session hands it, per KV head, a score for every position of the sequence and
  // the tokens the head keeps (empty: budget() each).
  virtual bool scores_by_reconstruction() const { return false; }
  virtual void set_reconstruction_scores(std::vector<std::vector<float>> /*by_position*/,
                                         std::vector<size_t> /*head_budgets*/) {}

  virtual bool reads_contents() const { return false; }
  virtual void observe_queries(const float* /*q*/, size_t /*nq*/, size_t /*q_heads*/,
                               const int64_t* /*positions*/, const RopeParams& /*rope*/) {}
  virtual void score_contents(size_t /*head*/, const float* /*keys*/, const float* /*values*/, size_t /*n*/,
                              int64_t /*next_position*/, const RopeParams& /*rope*/,
                              std::vector<float>& /*score*/) {}

 protected:
  size_t budget_;
};

}  // namespace veloxquant
