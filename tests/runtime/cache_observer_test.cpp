// The cache observer on cases whose answers are known: an fp16 cache reconstructs to fp16
// rounding, 4-bit TurboQuant to its Lloyd-Max distortion, zero queries attend uniformly (so the
// sink mass is a known fraction), key norms are those of the keys given; and in a real model,
// every layer and head is reported and misuse is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "model_files.h"
#include "test_data.h"
#include "veloxquant/model.h"
#include "veloxquant/observer.h"

namespace veloxquant {
namespace {

using test::error_message;

constexpr size_t kHeads = 2, kQHeads = 4, kDim = 128;
const RopeParams kRope{kDim, 10000.0f, 1.0f, RopeLayout::Neox};

// Runs `tokens` tokens of Gaussian keys and values through a cache of `spec` in steps of `step`,
// attending with `queries` (Gaussian when true, zero otherwise), reporting each step.
std::vector<LayerObservation> observe(const std::string& spec, size_t tokens, size_t step, bool queries,
                                      double key_scale = 1.0) {
  KVCache cache(spec, LayerShape{kHeads, kDim, 0, 0});
  CacheObserver observer(1, kHeads, kQHeads, kDim, kRope);
  const std::vector<float> k = test::gaussian(tokens * kHeads * kDim, 1, key_scale);
  const std::vector<float> v = test::gaussian(tokens * kHeads * kDim, 2);
  std::vector<float> q = test::gaussian(tokens * kQHeads * kDim, 3, 0.1);
  if (!queries) std::fill(q.begin(), q.end(), 0.0f);
  for (size_t start = 0; start < tokens; start += step) {
    const size_t n = std::min(step, tokens - start);
    std::vector<int64_t> pos(n);
    for (size_t t = 0; t < n; ++t) pos[t] = static_cast<int64_t>(start + t);
    std::vector<float> rq(&q[start * kQHeads * kDim], &q[(start + n) * kQHeads * kDim]);
    for (size_t t = 0; t < n; ++t) apply_rope(kRope, &rq[t * kQHeads * kDim], kQHeads, kDim, pos[t]);
    const float* kb = &k[start * kHeads * kDim];
    const float* vb = &v[start * kHeads * kDim];
    cache.append(TensorView::f32(kb, {n, kHeads, kDim}), TensorView::f32(vb, {n, kHeads, kDim}), pos, kRope);
    std::vector<float> out(n * kQHeads * kDim);
    cache.attend(TensorView::f32(rq.data(), {n, kQHeads, kDim}), out.data());
    cache.finish_step();
    observer.record(0, n, kb, vb, pos, rq.data(), out.data(), 0.5, 0.25);
  }
  return observer.report(std::span(&cache, 1));
}

TEST(CacheObserver, Fp16CacheReconstructsToHalfPrecisionRounding) {
  const std::vector<LayerObservation> o = observe("fp16", 64, 16, true);
  ASSERT_EQ(o.size(), 1u);
  ASSERT_EQ(o[0].heads.size(), kHeads);
  EXPECT_EQ(o[0].key_bytes, 64 * kHeads * kDim * 2);
  EXPECT_DOUBLE_EQ(o[0].encode_seconds, 4 * 0.5);  // four steps, as reported
  EXPECT_DOUBLE_EQ(o[0].attend_seconds, 4 * 0.25);
  for (const HeadObservation& h : o[0].heads) {
    EXPECT_EQ(h.stored_tokens, 64u);
    // fp16 keeps 11 significant bits: relative error about 2^-12 per element.
    EXPECT_GT(h.key_error, 0.0);
    EXPECT_LT(h.key_error, 5e-4);
    EXPECT_LT(h.value_error, 5e-4);
    EXPECT_LT(h.attention_error, 1e-3);
  }
}

TEST(CacheObserver, TurboQuant4BitErrorIsItsLloydMaxDistortion) {
  // After the random rotation each coordinate of a unit vector is near N(0, 1/d); 4-bit
  // Lloyd-Max quantization of a Gaussian leaves a mean squared error of 0.009497 of its
  // variance, so the relative L2 error is about sqrt(0.0095) = 0.097.
  const std::vector<LayerObservation> o = observe("turboquant_mse:bits=4,vbits=4", 256, 256, true);
  for (const HeadObservation& h : o[0].heads) {
    EXPECT_NEAR(h.key_error, 0.097, 0.01);
    EXPECT_NEAR(h.value_error, 0.097, 0.01);
    EXPECT_GT(h.attention_error, 0.0);
    EXPECT_LT(h.attention_error, 0.2);
  }
}

TEST(CacheObserver, ZeroQueriesPutAKnownShareOnTheSinks) {
  // Zero queries give uniform attention: query t sees t + 1 tokens and puts 4 / (t + 1) on the
  // first four; queries t >= 4 count.
  const std::vector<LayerObservation> o = observe("fp16", 8, 8, false);
  const double want = (4.0 / 5 + 4.0 / 6 + 4.0 / 7 + 4.0 / 8) / 4;
  for (const HeadObservation& h : o[0].heads) EXPECT_NEAR(h.sink_mass, want, 1e-12);
}

TEST(CacheObserver, KeyNormsAreThoseOfTheKeysGiven) {
  // Gaussian keys of standard deviation 3 in 128 dimensions: norms near 3 * sqrt(128).
  const std::vector<LayerObservation> o = observe("fp16", 256, 64, true, 3.0);
  for (const HeadObservation& h : o[0].heads) {
    EXPECT_NEAR(h.key_norm_mean, 3.0 * std::sqrt(128.0), 0.5);
    EXPECT_GT(h.key_norm_max, h.key_norm_mean);
  }
}

TEST(CacheObserver, ReportsEveryLayerAndHeadOfAModel) {
  const Model model = Model::load(test::stories_path());
  const ModelConfig& c = model.config();
  CacheObserver observer(c.layers, c.kv_heads, c.heads, c.head_dim, c.rope);
  Session session(model, SessionOptions{"kivi:kbits=4,vbits=4", 0});
  session.set_observer(&observer);
  session.eval(model.tokenizer().encode("Once upon a time there was a girl who liked to play in the park.", true));
  const std::vector<LayerObservation> o = observer.report(session.caches());
  ASSERT_EQ(o.size(), c.layers);
  const auto j = nlohmann::json::parse(observations_json(o));
  ASSERT_EQ(j.at("layers").size(), c.layers);
  ASSERT_EQ(j.at("layers").at(0).at("heads").size(), c.kv_heads);
  for (const LayerObservation& l : o) {
    EXPECT_GT(l.encode_seconds, 0.0);
    EXPECT_GT(l.attend_seconds, 0.0);
    // KIVI keeps its first 128 tokens in fp16: only rounding error so far.
    for (const HeadObservation& h : l.heads) EXPECT_LT(h.attention_error, 1e-2);
  }
  // Misuse: attaching to a session that holds tokens, a report for other caches.
  EXPECT_CONTAINS(error_message<Error>([&] { session.set_observer(&observer); }), "expected an empty session");
  EXPECT_CONTAINS(error_message<Error>([&] { observer.report(session.caches().first(1)); }), "one per layer");
  EXPECT_CONTAINS(error_message<Error>([&] { CacheObserver(1, 2, 3, 8, c.rope); }), "multiple of KV heads");
  // reset() forgets the tokens, so the session can be observed again.
  session.reset();
  session.set_observer(&observer);
}

}  // namespace
}  // namespace veloxquant
