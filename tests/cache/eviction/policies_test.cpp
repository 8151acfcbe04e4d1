// What each eviction policy's paper says it keeps, on workloads built so the answer is known.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cache/eviction/select.h"
#include "cache/eviction/squeeze_budgets.h"
#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

constexpr size_t kDim = 32;

// Keys, values and queries of one KV head with one query head: noise, except that the tokens in
// `heavy` have a key along e0 and every query points along e0, so they draw most of the attention.
struct Workload {
  std::vector<float> k, v, q;
};

Workload workload(size_t tokens, const std::vector<size_t>& heavy, uint64_t seed, size_t heads = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.3f);
  Workload w;
  w.k.resize(tokens * heads * kDim);
  w.v.resize(w.k.size());
  w.q.resize(w.k.size());
  for (auto* x : {&w.k, &w.v, &w.q})
    for (float& f : *x) f = n(rng);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t h = 0; h < heads; ++h) w.q[(t * heads + h) * kDim] = 4.0f;
  }
  for (size_t t : heavy) w.k[t * heads * kDim] = 4.0f;  // head 0 only
  return w;
}

// Prefill of `prompt` tokens, then one token per step: attend_observed and evict as the runtime does.
void run(KVCache& cache, const Workload& w, size_t prompt, size_t tokens, size_t heads = 1) {
  std::vector<float> out(prompt * heads * kDim);
  for (size_t t = 0; t < tokens;) {
    const size_t n = t == 0 ? prompt : 1;
    const size_t at = t * heads * kDim;
    cache.append(TensorView::f32(&w.k[at], {n, heads, kDim}), TensorView::f32(&w.v[at], {n, heads, kDim}));
    cache.attend_observed(TensorView::f32(&w.q[at], {n, heads, kDim}), out.data());
    cache.evict();
    t += n;
  }
}

bool holds(const KVCache& c, int64_t position, size_t head = 0) {
  const std::vector<int64_t> p = c.positions(head);
  return std::find(p.begin(), p.end(), position) != p.end();
}

TEST(StreamingLlm, KeepsTheSinksAndTheNewestTokens) {
  KVCache cache("streaming_llm:budget=40,sinks=4", LayerShape{1, kDim, 0, 0});
  run(cache, workload(300, {}, 1), 50, 300);
  std::vector<int64_t> want = {0, 1, 2, 3};
  for (int64_t t = 264; t < 300; ++t) want.push_back(t);
  EXPECT_EQ(cache.positions(0), want);
}

// The paper's setup: kept tokens at their cache positions 0..n-1, the query at n-1. The cache
// stores the sinks before RoPE and rotates them at attend time; a plain cache filled with the kept
// tokens at those positions must attend the same.
TEST(StreamingLlm, AttendsAsIfTokensSatAtTheirCachePositions) {
  const size_t tokens = 500, budget = 64, sinks = 4;
  const RopeParams rope{kDim, 10000.0f, 1.0f, RopeLayout::Neox};
  const Workload w = workload(tokens, {}, 2);
  KVCache cache("streaming_llm:budget=64,sinks=4", LayerShape{1, kDim, 0, 0});
  std::vector<float> out(kDim), want(kDim), q(kDim);
  for (size_t t = 0; t < tokens; ++t) {
    const int64_t pos = static_cast<int64_t>(t);
    cache.append(TensorView::f32(&w.k[t * kDim], {1, 1, kDim}), TensorView::f32(&w.v[t * kDim], {1, 1, kDim}),
                 std::span(&pos, 1), rope);
    std::copy_n(&w.q[t * kDim], kDim, q.data());
    apply_rope(rope, q.data(), 1, kDim, pos);
    cache.attend_observed(TensorView::f32(q.data(), {1, 1, kDim}), out.data());
    cache.evict();
  }
  KVCache plain("fp16", LayerShape{1, kDim, 0, 0});
  const std::vector<int64_t> kept = cache.positions(0);
  ASSERT_EQ(kept.size(), budget);
  for (size_t i = 0; i < budget; ++i) {
    const int64_t cache_position = static_cast<int64_t>(i);
    plain.append(TensorView::f32(&w.k[kept[i] * kDim], {1, 1, kDim}),
                 TensorView::f32(&w.v[kept[i] * kDim], {1, 1, kDim}), std::span(&cache_position, 1), rope);
  }
  // The last query: at position tokens-1 for the streaming cache, at budget-1 for the plain one.
  std::copy_n(&w.q[(tokens - 1) * kDim], kDim, q.data());
  std::vector<float> q_plain = q;
  apply_rope(rope, q.data(), 1, kDim, tokens - 1);
  apply_rope(rope, q_plain.data(), 1, kDim, budget - 1);
  cache.attend(TensorView::f32(q.data(), {1, 1, kDim}), out.data());
  plain.attend(TensorView::f32(q_plain.data(), {1, 1, kDim}), want.data());
  for (size_t c = 0; c < kDim; ++c) EXPECT_NEAR(out[c], want[c], 2e-3) << c;
  EXPECT_EQ(kept[sinks - 1], static_cast<int64_t>(sinks - 1));
}

// Sinks sit outside the codes and are rotated per call; the fused path gathers them beside the
// fp16 tail. All three paths must agree, also while the sinks are still filling (queries that
// see only some of them) and over a block quantizer whose key and value streams split apart.
TEST(StreamingLlm, AttendPathsAgreeWithSinks) {
  const RopeParams rope{kDim, 10000.0f, 1.0f, RopeLayout::Interleaved};
  for (const char* spec : {"streaming_llm:budget=120,sinks=4", "streaming_llm:budget=120,sinks=4+kivi:residual=32"}) {
    const size_t heads = 2, qh = 4;
    const Workload w = workload(400, {}, 9, heads);
    std::vector<float> q(3 * qh * kDim);
    std::mt19937_64 rng(3);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float& x : q) x = n(rng);
    KVCache cache(spec, LayerShape{heads, kDim, 0, 0});
    auto compare = [&](size_t nq, const char* when) {
      std::vector<float> fused(nq * qh * kDim), decoded(fused.size()), reference(fused.size());
      const TensorView view = TensorView::f32(q.data(), {nq, qh, kDim});
      cache.attend(view, fused.data(), AttendPath::Fused);
      cache.attend(view, decoded.data(), AttendPath::Decoded);
      cache.attend(view, reference.data(), AttendPath::Reference);
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_NEAR(fused[i], reference[i], 1e-4) << spec << " " << when << " " << i;
        ASSERT_NEAR(decoded[i], reference[i], 1e-4) << spec << " " << when << " " << i;
      }
    };
    std::vector<int64_t> pos(400);
    std::iota(pos.begin(), pos.end(), 0);
    size_t t = 0;
    for (size_t step : {3, 50, 100, 1, 1, 200}) {
      cache.append(TensorView::f32(&w.k[t * heads * kDim], {step, heads, kDim}),
                   TensorView::f32(&w.v[t * heads * kDim], {step, heads, kDim}), std::span(&pos[t], step), rope);
      t += step;
      compare(std::min<size_t>(step, 3), step == 3 ? "sinks filling" : "after eviction");
      cache.evict();
    }
  }
}

TEST(H2o, KeepsHeavyHittersBeyondTheRecentWindow) {
  KVCache cache("h2o:budget=48,recent=0.5", LayerShape{1, kDim, 0, 0});
  run(cache, workload(400, {10, 77, 150}, 3), 100, 400);
  for (int64_t p : {10, 77, 150}) EXPECT_TRUE(holds(cache, p)) << p;
  for (int64_t p = 376; p < 400; ++p) EXPECT_TRUE(holds(cache, p)) << "recent " << p;
  EXPECT_EQ(cache.stored_tokens(0), 48u);
}

TEST(Tova, EveryHeadKeepsTheSameTokens) {
  const size_t heads = 3;
  KVCache cache("tova:budget=40", LayerShape{heads, kDim, 0, 0});
  run(cache, workload(300, {20, 200}, 4, heads), 60, 300, heads);
  EXPECT_EQ(cache.positions(0), cache.positions(1));
  EXPECT_EQ(cache.positions(0), cache.positions(2));
  EXPECT_TRUE(holds(cache, 20));
  EXPECT_TRUE(holds(cache, 200));
}

TEST(SnapKv, KeepsWhatTheObservationWindowReadsThenAppendsDecodedTokens) {
  KVCache cache("snapkv:budget=64,window=16,kernel=3", LayerShape{1, kDim, 0, 0});
  run(cache, workload(300, {40, 41, 120}, 5), 250, 300);
  for (int64_t p : {40, 41, 120}) EXPECT_TRUE(holds(cache, p)) << p;
  // Max-pooling brings a selected token's neighbours along.
  EXPECT_TRUE(holds(cache, 39));
  EXPECT_TRUE(holds(cache, 121));
  for (int64_t p = 234; p < 300; ++p) EXPECT_TRUE(holds(cache, p)) << "window or decoded " << p;
  EXPECT_EQ(cache.stored_tokens(0), 64u + 50u);  // the prompt's budget, then every decoded token
}

// The first steps of a prompt of `total` tokens (0: the steps are all of it), evaluated as the
// runtime's micro-batches are: each step says how much of the prompt follows it
// (continue_prompt), attends and finishes.
void run_prompt_in_steps(KVCache& cache, const Workload& w, const std::vector<size_t>& steps,
                         size_t heads = 1, size_t total = 0) {
  if (total == 0) total = std::accumulate(steps.begin(), steps.end(), size_t{0});
  size_t t = 0;
  for (size_t n : steps) {
    std::vector<float> out(n * heads * kDim);
    const size_t at = t * heads * kDim;
    t += n;
    cache.continue_prompt(total - t);
    cache.append(TensorView::f32(&w.k[at], {n, heads, kDim}), TensorView::f32(&w.v[at], {n, heads, kDim}));
    cache.attend_observed(TensorView::f32(&w.q[at], {n, heads, kDim}), out.data());
    cache.finish_step();
  }
}

TEST(SnapKv, APromptCutIntoStepsSelectsAsTheWholePrompt) {
  // The paper selects once, from the prompt's last window of queries: however the runtime cuts
  // the prompt, the same tokens stay, and none leaves before the prompt's last step.
  for (const char* spec : {"snapkv:budget=24,window=8,kernel=3", "adakv:budget=24,window=8,kernel=3"}) {
    const Workload w = workload(100, {10, 11, 57, 80}, 9, 2);
    KVCache whole(spec, LayerShape{2, kDim, 0, 0});
    run_prompt_in_steps(whole, w, {100}, 2);
    for (const std::vector<size_t>& steps :
         std::vector<std::vector<size_t>>{{40, 40, 20}, {96, 4}, {99, 1}, {50, 50}}) {
      KVCache first(spec, LayerShape{2, kDim, 0, 0});
      run_prompt_in_steps(first, w, {steps.front()}, 2, 100);
      EXPECT_EQ(first.stored_tokens(0), steps.front()) << spec << ": nothing leaves while the prompt goes on";
      KVCache split(spec, LayerShape{2, kDim, 0, 0});
      run_prompt_in_steps(split, w, steps, 2);
      for (size_t h = 0; h < 2; ++h) {
        EXPECT_EQ(split.positions(h), whole.positions(h))
            << spec << " head " << h << ", first step " << steps[0];
      }
    }
  }
}

TEST(SnapKv, KeepsWhatOnlyThePromptsLastQueriesRead) {
  // Every query reads the heavy tokens along e0 but the last 8, which read token 10 along e1: the
  // needle a question at the end of a prompt asks for.
  Workload w = workload(100, {50, 51, 52}, 11);
  for (size_t t = 92; t < 100; ++t) w.q[t * kDim] = 0.0f, w.q[t * kDim + 1] = 4.0f;
  w.k[10 * kDim + 1] = 4.0f;
  KVCache cache("snapkv:budget=16,window=8,kernel=1", LayerShape{1, kDim, 0, 0});
  run_prompt_in_steps(cache, w, {40, 40, 20});
  EXPECT_TRUE(holds(cache, 10));
  EXPECT_EQ(cache.stored_tokens(0), 16u);
  // Each step taken as a prompt of its own, the first two select with their own last queries,
  // which never read token 10, and drop it before the question comes.
  KVCache steps_alone("snapkv:budget=16,window=8,kernel=1", LayerShape{1, kDim, 0, 0});
  std::vector<float> out(40 * kDim);
  for (size_t t : {size_t{0}, size_t{40}, size_t{80}}) {
    const size_t n = t == 80 ? 20 : 40;
    steps_alone.append(TensorView::f32(&w.k[t * kDim], {n, 1, kDim}),
                       TensorView::f32(&w.v[t * kDim], {n, 1, kDim}));
    steps_alone.attend_observed(TensorView::f32(&w.q[t * kDim], {n, 1, kDim}), out.data());
    steps_alone.finish_step();
  }
  EXPECT_FALSE(holds(steps_alone, 10));
}

TEST(AdaKv, GivesTheConcentratedHeadFewerTokensAtTheSameLayerTotal) {
  // Head 0's attention piles on a few heavy tokens, head 1's is spread evenly: Ada-KV moves
  // budget to head 1, where more tokens matter (no pooling, so that head 0's votes stay on the
  // heavy tokens themselves).
  const size_t heads = 2, budget = 64;
  KVCache cache("adakv:budget=64,window=8,kernel=1,floor=0.2", LayerShape{heads, kDim, 0, 0});
  KVCache snap("snapkv:budget=64,window=8,kernel=1", LayerShape{heads, kDim, 0, 0});
  std::vector<size_t> heavy;
  for (size_t t = 10; t < 200; t += 20) heavy.push_back(t);
  const Workload w = workload(256, heavy, 6, heads);
  run(cache, w, 256, 256, heads);
  run(snap, w, 256, 256, heads);
  EXPECT_LT(cache.stored_tokens(0), cache.stored_tokens(1));
  EXPECT_LE(cache.stored_tokens(0) + cache.stored_tokens(1), heads * budget);
  EXPECT_GE(cache.stored_tokens(0), 8u + static_cast<size_t>(0.2 * (budget - 8)));
  EXPECT_EQ(snap.stored_tokens(0), budget);
  EXPECT_EQ(snap.stored_tokens(1), budget);
  for (size_t t : heavy) EXPECT_TRUE(holds(cache, static_cast<int64_t>(t), 0)) << t;
}

TEST(PyramidKv, BudgetsShrinkWithDepthAtTheSameAverage) {
  const int layers = 8;
  std::vector<size_t> budgets;
  for (int l = 0; l < layers; ++l) {
    budgets.push_back(KVCache("pyramidkv:budget=256,window=32,beta=20", LayerShape{1, kDim, l, 0, layers}).budget());
  }
  EXPECT_TRUE(std::is_sorted(budgets.rbegin(), budgets.rend()));
  EXPECT_GT(budgets.front(), 400u);
  EXPECT_LT(budgets.back(), 60u);
  const double mean = std::accumulate(budgets.begin(), budgets.end(), 0.0) / layers;
  EXPECT_NEAR(mean, 256.0, 1.0);
}

TEST(Squeeze, MovesBudgetFromTheLayersAttentionChangesLeast) {
  const std::vector<size_t> b = squeeze_budgets({0.95, 0.96, 0.5, 0.52, 0.2, 0.21}, 100, 0.4);
  EXPECT_EQ(b, (std::vector<size_t>{40, 40, 130, 130, 130, 130}));
  EXPECT_LE(std::accumulate(b.begin(), b.end(), size_t{0}), 600u);
  EXPECT_EQ(squeeze_budgets({0.7, 0.7, 0.7}, 100, 0.4), (std::vector<size_t>{100, 100, 100}));
  EXPECT_EQ(squeeze_budgets({0.7}, 100, 0.4), (std::vector<size_t>{100}));
}

TEST(EvictionUnits, AnEncodedBlockLeavesWhole) {
  // Keys in blocks of 32 over the first 64 tokens, values in blocks of 4 over the first 96.
  const std::vector<Unit> u = stored_units(2, 100, {64, 32}, {96, 4});
  ASSERT_EQ(u.size(), 2u + 2u + 8u + 4u);
  EXPECT_EQ(u[2].begin, 2u);
  EXPECT_EQ(u[2].end, 34u);
  EXPECT_EQ(u[4].size(), 4u);   // key tail over a value block
  EXPECT_EQ(u.back().size(), 1u);
  std::vector<float> score(102, 0.0f);
  score[40] = 1.0f;  // a token inside the second key block
  const std::vector<bool> keep = keep_units(u, score, 40, 2, 3);
  EXPECT_TRUE(keep[0] && keep[1]);  // sinks
  EXPECT_TRUE(keep[3]);             // the block holding the best token
  size_t kept = 0;
  for (size_t i = 0; i < u.size(); ++i) kept += keep[i] ? u[i].size() : 0;
  EXPECT_LE(kept, 40u);
}

TEST(EvictionSpec, ComposesAPolicyWithAQuantizer) {
  const Spec s = parse_spec("snapkv:budget=128+kivi:kbits=4");
  EXPECT_EQ(s.eviction->name, "snapkv");
  EXPECT_EQ(s.method->name, "kivi");
  EXPECT_EQ(s.to_string(), "snapkv:budget=128,window=32,kernel=7+kivi:kbits=4,vbits=2,group=32,residual=128");
  EXPECT_EQ(parse_spec("h2o").method->name, "fp16");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("kivi+h2o"); }), "eviction policy");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("h2o+snapkv"); }), "'snapkv' is an eviction policy");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("h2o+kivi+fp16"); }), "continues after the quantizer 'kivi'");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("h2o:budget=8"); }), "budget");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { KVCache("snapkv:budget=32,window=32", LayerShape{1, kDim, 0, 0}); }),
                  "window < budget");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { KVCache("h2o:budget=40+kivi", LayerShape{1, kDim, 0, 0}); }),
                  "expected budget >= 51");
}

TEST(EvictionSpec, CachesThatEvictCannotBeRestored) {
  KVCache cache("h2o:budget=64", LayerShape{1, kDim, 0, 0});
  EXPECT_CONTAINS(test::error_message<Error>([&] { cache.restore({CacheStream{}}, {CacheStream{}}); }),
                  "cannot be restored");
}

}  // namespace
}  // namespace veloxquant
