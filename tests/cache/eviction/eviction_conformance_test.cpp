// Every eviction policy, alone and composed with a block quantizer (KIVI: keys in blocks of 32),
// a per-token one (TurboQuant) and one whose blocks vary in length (CacheGen's coded blocks),
// over a long run of prompt chunks and decode steps: budgets hold after every step, evicted
// tokens give their bytes back, attention stays finite and reads exactly the tokens the cache
// says it kept.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

constexpr size_t kHeads = 2, kGroup = 2, kDim = 64, kBudget = 96;

// (policy, quantizer)
class EvictionConformance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::string spec() const {
    return std::get<0>(GetParam()) + ":budget=" + std::to_string(kBudget) + "+" + std::get<1>(GetParam());
  }
  bool prompts_only() const {  // SnapKV's relatives and Expected Attention compress prompts only
    const std::string& p = std::get<0>(GetParam());
    return p == "snapkv" || p == "pyramidkv" || p == "adakv" || p == "expected_attention";
  }
};

// The same policies storing fp16, where kept bytes and attention have exact answers.
class EvictionExact : public ::testing::TestWithParam<std::string> {
 protected:
  std::string spec() const { return GetParam() + ":budget=" + std::to_string(kBudget); }
};

struct Stream {
  std::vector<float> k, v, q;  // [tokens, heads, dim] and [tokens, q heads, dim]
};

Stream random_stream(size_t tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Stream s;
  s.k.resize(tokens * kHeads * kDim);
  s.v.resize(s.k.size());
  s.q.resize(tokens * kHeads * kGroup * kDim);
  for (auto* x : {&s.k, &s.v, &s.q})
    for (float& f : *x) f = n(rng);
  return s;
}

TEST_P(EvictionConformance, BudgetsHoldAndBytesShrinkOverALongRun) {
  const Stream s = random_stream(700, 3);
  KVCache cache(spec(), LayerShape{kHeads, kDim, 2, 1, 4});
  KVCache full(std::get<1>(GetParam()), LayerShape{kHeads, kDim, 2, 1, 4});
  const size_t row = kHeads * kDim, qrow = kHeads * kGroup * kDim;
  std::vector<float> out(200 * qrow);
  size_t t = 0, since_prompt = 0;
  // Two prompts of 200 tokens, each followed by 150 decode steps.
  for (size_t round = 0; round < 2; ++round) {
    for (size_t step = 0; step < 151; ++step) {
      const size_t n = step == 0 ? 200 : 1;
      const TensorView k = TensorView::f32(&s.k[t * row], {n, kHeads, kDim});
      const TensorView v = TensorView::f32(&s.v[t * row], {n, kHeads, kDim});
      cache.append(k, v);
      full.append(k, v);
      cache.attend_observed(TensorView::f32(&s.q[t * qrow], {n, kHeads * kGroup, kDim}), out.data());
      for (size_t i = 0; i < n * qrow; ++i) ASSERT_TRUE(std::isfinite(out[i])) << spec();
      cache.evict();
      t += n;
      since_prompt = n > 1 ? 0 : since_prompt + 1;
      size_t stored = 0;
      for (size_t h = 0; h < kHeads; ++h) {
        stored += cache.stored_tokens(h);
        const size_t allowed = cache.budget() + (prompts_only() ? since_prompt : 0);
        if (std::get<0>(GetParam()) != "adakv") {
          ASSERT_LE(cache.stored_tokens(h), allowed) << spec() << " head " << h << " after " << t << " tokens";
        }
        ASSERT_EQ(cache.positions(h).size(), cache.stored_tokens(h));
      }
      // AdaKV moves budget between heads; the layer's total is what it guarantees.
      ASSERT_LE(stored, kHeads * (cache.budget() + (prompts_only() ? since_prompt : 0))) << spec();
    }
  }
  EXPECT_EQ(cache.tokens(), t);
  EXPECT_EQ(cache.fp16_bytes(), full.fp16_bytes());
  // Running budgets hold the cache to a fraction of the 700 tokens; SnapKV and its relatives keep
  // every decoded token on top of their prompt budget.
  EXPECT_LT(cache.bytes(), prompts_only() ? full.bytes() : full.bytes() / 2) << spec();
}

// With fp16 storage the bytes are exactly 2 per element of every token kept.
TEST_P(EvictionExact, CountsKeptBytesExactly) {
  const Stream s = random_stream(300, 5);
  KVCache cache(spec(), LayerShape{kHeads, kDim, 0, 1, 1});
  std::vector<float> out(300 * kHeads * kGroup * kDim);
  cache.append(TensorView::f32(s.k.data(), {300, kHeads, kDim}), TensorView::f32(s.v.data(), {300, kHeads, kDim}));
  cache.attend_observed(TensorView::f32(s.q.data(), {300, kHeads * kGroup, kDim}), out.data());
  cache.evict();
  size_t stored = 0;
  for (size_t h = 0; h < kHeads; ++h) stored += cache.stored_tokens(h);
  EXPECT_LT(stored, 300 * kHeads);
  EXPECT_EQ(cache.key_bytes(), stored * kDim * 2);
  EXPECT_EQ(cache.value_bytes(), stored * kDim * 2);
}

// After eviction, attention equals exact attention over the tokens positions() names.
TEST_P(EvictionExact, AttendsExactlyTheKeptTokens) {
  const Stream s = random_stream(260, 7);
  KVCache cache(spec(), LayerShape{kHeads, kDim, 0, 1, 1});
  const size_t row = kHeads * kDim, qrow = kHeads * kGroup * kDim;
  std::vector<float> out(259 * qrow);
  cache.append(TensorView::f32(s.k.data(), {259, kHeads, kDim}), TensorView::f32(s.v.data(), {259, kHeads, kDim}));
  cache.attend_observed(TensorView::f32(s.q.data(), {259, kHeads * kGroup, kDim}), out.data());
  cache.evict();
  cache.append(TensorView::f32(&s.k[259 * row], {1, kHeads, kDim}), TensorView::f32(&s.v[259 * row], {1, kHeads, kDim}));
  const float* q = &s.q[259 * qrow];
  cache.attend(TensorView::f32(q, {1, kHeads * kGroup, kDim}), out.data());
  for (size_t h = 0; h < kHeads; ++h) {
    const std::vector<int64_t> kept = cache.positions(h);
    ASSERT_EQ(kept.back(), 259);
    std::vector<float> k, v;
    for (int64_t p : kept) {
      k.insert(k.end(), &s.k[p * row + h * kDim], &s.k[p * row + (h + 1) * kDim]);
      v.insert(v.end(), &s.v[p * row + h * kDim], &s.v[p * row + (h + 1) * kDim]);
    }
    const std::vector<float> want =
        exact_attention(q + h * kGroup * kDim, 1, kGroup, k.data(), v.data(), kept.size(), 1, kDim);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(out[h * kGroup * kDim + i], want[i], 2e-3) << spec() << " head " << h;
    }
  }
}

TEST_P(EvictionConformance, SpecRoundTrips) {
  const Spec s = parse_spec(spec());
  ASSERT_NE(s.eviction, nullptr);
  EXPECT_EQ(parse_spec(s.to_string()), s);
  EXPECT_EQ(parse_spec(s.to_string()).to_string(), s.to_string());
}

// These suites drive a KVCache alone. kvzip selects with scores a Session's reconstruction pass
// hands it (it refuses to select without them); tests/eval/kvzip_test.cpp drives it.
std::vector<std::string> policy_names() {
  std::vector<std::string> all;
  for (const MethodInfo& p : registered_policies())
    if (p.name != "kvzip") all.push_back(p.name);
  return all;
}

std::vector<std::tuple<std::string, std::string>> cases() {
  std::vector<std::tuple<std::string, std::string>> all;
  for (const std::string& p : policy_names())
    for (const char* q : {"fp16", "kivi", "turboquant_mse:bits=4", "cachegen:block=16"})
      all.emplace_back(p, q);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Policies, EvictionConformance, ::testing::ValuesIn(cases()),
                         [](const auto& p) {
                           std::string q = std::get<1>(p.param);
                           return std::get<0>(p.param) + "_" + q.substr(0, q.find(':'));
                         });
INSTANTIATE_TEST_SUITE_P(Policies, EvictionExact, ::testing::ValuesIn(policy_names()));

}  // namespace
}  // namespace veloxquant
