// Sampler: greedy is argmax, a seed fixes the stream, top-k / top-p cut where they should, the
// draws follow softmax(logits / T), and the repetition penalty acts as llama.cpp's does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "veloxquant/error.h"
#include "veloxquant/sampler.h"

namespace veloxquant {
namespace {

const std::vector<float> kLogits{1.0f, 3.0f, 2.0f, -1.0f, 2.5f};

std::map<int32_t, int> histogram(SamplerOptions o, int draws) {
  Sampler s(o);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) ++h[s.sample(kLogits)];
  return h;
}

TEST(Sampler, GreedyPicksTheLargestLogitAndTheLowestIdOnTies) {
  Sampler s(SamplerOptions{.temperature = 0.0f});
  EXPECT_EQ(s.sample(kLogits), 1);
  EXPECT_EQ(s.sample(std::vector<float>{0.5f, 2.0f, 2.0f}), 1);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const SamplerOptions a{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 7};
  SamplerOptions b = a;
  b.seed = 8;
  Sampler s1(a), s2(a), s3(b);
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 64; ++i) {
    x.push_back(s1.sample(kLogits));
    y.push_back(s2.sample(kLogits));
    z.push_back(s3.sample(kLogits));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampler, DrawsFollowTheTemperedSoftmax) {
  const float t = 1.5f;
  const int draws = 40000;
  const auto h = histogram(SamplerOptions{.temperature = t, .top_k = 0, .top_p = 1.0f, .seed = 1}, draws);
  double z = 0;
  for (float l : kLogits) z += std::exp(l / t);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double p = std::exp(kLogits[i] / t) / z;
    const double sd = std::sqrt(p * (1 - p) / draws);
    const auto it = h.find(static_cast<int32_t>(i));
    const double f = it == h.end() ? 0.0 : static_cast<double>(it->second) / draws;
    EXPECT_NEAR(f, p, 5 * sd) << "token " << i;
  }
}

TEST(Sampler, TopKAndTopPKeepOnlyTheHead) {
  // top_k = 2 keeps tokens 1 and 4.
  auto h = histogram(SamplerOptions{.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = 2}, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(1) && h.count(4));
  // Untempered probabilities: p1 = 0.47, p4 = 0.29, p2 = 0.17 ...; top_p = 0.7 needs tokens 1, 4.
  h = histogram(SamplerOptions{.temperature = 1.0f, .top_k = 0, .top_p = 0.7f, .seed = 3}, 2000);
  EXPECT_EQ(h.size(), 2u);
  h = histogram(SamplerOptions{.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .seed = 4}, 100);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.begin()->first, 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  Sampler s(SamplerOptions{.temperature = 0.0f, .repeat_penalty = 2.0f, .repeat_last_n = 2});
  s.accept(1);  // 3.0 -> 1.5, so 4 (2.5) wins
  EXPECT_EQ(s.sample(kLogits), 4);
  s.accept(4);  // 2.5 -> 1.25, now 2 (2.0) wins
  EXPECT_EQ(s.sample(kLogits), 2);
  s.accept(2);  // the window holds 4 and 2 only: 1 is back at 3.0
  EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, RequestThenPickIsSampleAndKeepsTheStream) {
  // A sampler elsewhere (the GPU's) gets request() and picks as pick() does: the same tokens as
  // sample() on a twin sampler, the penalty's tokens distinct and sorted, one draw per token.
  const SamplerOptions o{.temperature = 0.9f, .top_k = 3, .top_p = 0.9f, .repeat_penalty = 1.3f, .seed = 11};
  Sampler direct(o), split(o);
  for (int i = 0; i < 200; ++i) {
    const int32_t a = direct.sample(kLogits);
    const SampleRequest r = split.request();
    EXPECT_TRUE(std::is_sorted(r.penalized.begin(), r.penalized.end()));
    EXPECT_EQ(std::adjacent_find(r.penalized.begin(), r.penalized.end()), r.penalized.end());
    EXPECT_GE(r.uniform, 0.0);
    EXPECT_LT(r.uniform, 1.0);
    const int32_t b = Sampler::pick(kLogits, r);
    ASSERT_EQ(a, b) << "token " << i;
    direct.accept(a), split.accept(b);
  }
  // Greedy takes no draw: the penalty's tokens still come along.
  Sampler greedy(SamplerOptions{.temperature = 0.0f, .repeat_penalty = 2.0f});
  greedy.accept(1), greedy.accept(1);
  const SampleRequest g = greedy.request();
  EXPECT_EQ(g.uniform, 0.0);
  EXPECT_EQ(g.penalized, std::vector<int32_t>{1});
  EXPECT_EQ(Sampler::pick(kLogits, g), 4);
}

TEST(Sampler, RejectsBadOptions) {
  EXPECT_THROW(Sampler(SamplerOptions{.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler(SamplerOptions{.top_k = -3}), Error);
  EXPECT_THROW(Sampler(SamplerOptions{.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler(SamplerOptions{.top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler(SamplerOptions{.repeat_penalty = 0.0f}), Error);
  Sampler s(SamplerOptions{});
  EXPECT_THROW(s.sample(std::vector<float>{}), Error);
}

}  // namespace
}  // namespace veloxquant
