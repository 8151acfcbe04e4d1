// KVzip (arXiv 2505.23416) on the project's model that copies from its context (vq-hd128): the
// scores come from the model re-reading its context, so the tokens a later question needs are
// kept without knowing the question. A needle planted in the prompt survives a budget at which
// the policies that score from the prompt's own last queries (SnapKV, Expected Attention) lose
// it; the budgets pool across heads and layers as in the paper; and what cannot work is refused.
#include <gtest/gtest.h>

#include "eval/eval_inputs.h"
#include "eval/needle_recall.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"

namespace veloxquant {
namespace {

class KvZip : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = test::missing_eval_input(); !missing.empty())
      GTEST_SKIP() << "not present: " << missing;
    if (haystack_.empty()) haystack_ = test::eval_text_tokens(20000);
  }
  static double recall(const std::string& spec) {
    NeedleOptions o;
    o.kv_spec = spec;
    o.lengths = {1024};
    o.depths = {0.3};
    o.trials = 1;
    return needle_recall(model(), haystack_, o).mean_recall;
  }
  static const Model& model() { return test::eval_model(); }
  static inline std::vector<int32_t> haystack_;
};

// A quarter of the prompt kept: the needle's tokens, which the model copies when it re-reads the
// context, stay; the prompt's last queries (SnapKV, Expected Attention) do not point at them.
TEST_F(KvZip, KeepsANeedleThatPromptScoredPoliciesLose) {
  const double kvzip = recall("kvzip:budget=256"), snapkv = recall("snapkv:budget=256"),
               expected = recall("expected_attention:budget=256"), full = recall("fp16");
  std::printf(
      "recall at 1024 tokens, budget 256: kvzip %.3f, snapkv %.3f, expected_attention %.3f, fp16 %.3f\n",
      kvzip, snapkv, expected, full);
  EXPECT_GT(full, 0.9);
  EXPECT_GT(kvzip, 0.8);
  EXPECT_GT(kvzip, snapkv + 0.2);
  EXPECT_GT(kvzip, expected + 0.2);
}

// The paper's non-uniform budgets: the layer caches together keep budget x heads x layers tokens
// of the prompt, shared unevenly; `uniform` gives every head its budget.
TEST_F(KvZip, BudgetsPoolAcrossHeadsAndLayers) {
  const std::vector<int32_t> prompt(haystack_.begin(), haystack_.begin() + 600);
  for (const bool uniform : {false, true}) {
    Session s(model(), SessionOptions{std::string("kvzip:budget=100,chunk=256,uniform=") +
                                      (uniform ? "true" : "false")});
    s.eval(prompt, Logits::None);
    size_t total = 0, least = SIZE_MAX, most = 0;
    for (const KVCache& cache : s.caches())
      for (size_t h = 0; h < cache.kv_heads(); ++h) {
        total += cache.stored_tokens(h);
        least = std::min(least, cache.stored_tokens(h));
        most = std::max(most, cache.stored_tokens(h));
      }
    const size_t heads = s.caches().size() * s.caches().front().kv_heads();
    EXPECT_EQ(total, 100 * heads) << "uniform " << uniform;
    if (uniform) EXPECT_EQ(least, most);
    else EXPECT_LT(least, most) << "every head kept the same number of tokens";
  }
}

TEST_F(KvZip, WhatCannotWorkIsRefused) {
  SessionOptions batched{"kvzip"};
  batched.batch = 2;
  EXPECT_THROW(Session(model(), batched), Error);
  Session a(model(), SessionOptions{"kvzip"}), b(model(), SessionOptions{"fp16"});
  const std::vector<int32_t> tokens(haystack_.begin(), haystack_.begin() + 8);
  const std::vector<SessionStep> steps = {{&a, tokens, Logits::Last}, {&b, tokens, Logits::Last}};
  EXPECT_THROW(eval_sessions(steps), Error);
  // A cache alone has no model to re-read its context with: it refuses to select.
  KVCache alone("kvzip:budget=16", LayerShape{1, 8, 0, 1});
  const std::vector<float> rows(40 * 8, 0.5f);
  alone.append(TensorView::f32(rows.data(), {40, 1, 8}), TensorView::f32(rows.data(), {40, 1, 8}));
  EXPECT_THROW(alone.evict(), Error);
}

// The cache's record of attention peaks: per KV head and token, the most attention any query of
// any of its query heads paid, as a plain softmax computes it.
TEST(AttentionPeaks, AreTheMostAnyQueryPaid) {
  constexpr size_t kHeads = 2, kGroup = 2, kDim = 8, kTokens = 40, kQueries = 5;
  KVCache cache("fp16", LayerShape{kHeads, kDim, 0, 1});
  std::vector<float> k(kTokens * kHeads * kDim), v(k.size()), q(kQueries * kHeads * kGroup * kDim);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.37f * i), v[i] = std::cos(0.11f * i);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 2.0f * std::sin(1.3f * i + 0.5f);
  cache.append(TensorView::f32(k.data(), {kTokens, kHeads, kDim}),
               TensorView::f32(v.data(), {kTokens, kHeads, kDim}));
  cache.record_attention_peaks(true);
  std::vector<float> out(q.size());
  cache.attend_observed(TensorView::f32(q.data(), {kQueries, kHeads * kGroup, kDim}), out.data());
  const std::vector<std::vector<float>>& peaks = cache.attention_peaks();
  ASSERT_EQ(peaks.size(), kHeads);
  for (size_t h = 0; h < kHeads; ++h) {
    std::vector<double> want(kTokens, 0.0);
    for (size_t i = 0; i < kQueries; ++i)
      for (size_t g = 0; g < kGroup; ++g) {
        const float* qi = &q[(i * kHeads * kGroup + h * kGroup + g) * kDim];
        const size_t visible = kTokens - kQueries + i + 1;  // query i is token kTokens - kQueries + i
        std::vector<double> s(visible);
        double top = -1e300, sum = 0;
        for (size_t t = 0; t < visible; ++t) {
          for (size_t c = 0; c < kDim; ++c) s[t] += double(qi[c]) * k[(t * kHeads + h) * kDim + c];
          s[t] /= std::sqrt(double(kDim));
          top = std::max(top, s[t]);
        }
        for (double& x : s) sum += (x = std::exp(x - top));
        for (size_t t = 0; t < visible; ++t) want[t] = std::max(want[t], s[t] / sum);
      }
    ASSERT_EQ(peaks[h].size(), kTokens);
    for (size_t t = 0; t < kTokens; ++t)
      EXPECT_NEAR(peaks[h][t], want[t], 2e-3) << "head " << h << ", token " << t;
  }
  EXPECT_THROW(KVCache("snapkv:budget=16", LayerShape{kHeads, kDim, 0, 1}).record_attention_peaks(true),
               Error);
}

}  // namespace
}  // namespace veloxquant
