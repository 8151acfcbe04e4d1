// The architectures beyond llama's block (qwen3, phi3, mistral3, gemma2, gemma3) inside the
// runtime with every cache method, and what a sliding window does to a cache. Their logits are
// checked against the numpy reference in tests/python/test_runtime_logits.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "calibrated_specs.h"
#include "dev/fixture_model.h"
#include "fixture_inputs.h"
#include "veloxquant/model.h"
#include "veloxquant/observer.h"

namespace veloxquant {
namespace {

using test::all_finite;
using test::some_tokens;

constexpr const char* kArchs[] = {"qwen3", "phi3", "mistral3", "gemma2", "gemma3"};

// A real head size (64), grouped-query attention, two layers: gemma's first is windowed (8 tokens).
Model fixture(const std::string& arch) {
  return test::model_of(dev::make_fixture({.arch = arch,
                                           .seed = 3,
                                           .shape = {.width = 128,
                                                     .heads = 4,
                                                     .kv_heads = 2,
                                                     .head_dim = 64,
                                                     .ffn = 128,
                                                     .layers = 2,
                                                     .context = 1024}}));
}

TEST(Architectures, EveryCacheMethodRunsOnEveryArchitecture) {
  for (const char* arch : kArchs) {
    const Model model = fixture(arch);
    const std::vector<int32_t> prompt = some_tokens(model, 72);
    std::vector<std::string> specs;
    for (const MethodInfo& m : registered_methods()) specs.push_back(test::runnable_spec(model, m.name));
    for (const MethodInfo& p : registered_policies()) specs.push_back(p.name + ":budget=64+kivi");
    for (const std::string& spec : specs) {
      SCOPED_TRACE(std::string(arch) + " " + spec);
      Session s(model, {.kv_spec = spec});
      ASSERT_TRUE(all_finite(s.eval(prompt, Logits::Last)));
      for (int32_t t : some_tokens(model, 2)) ASSERT_TRUE(all_finite(s.eval(std::vector<int32_t>{t}, Logits::Last)));
    }
  }
}

TEST(Architectures, ReadTheirBlocksFromTheFile) {
  const ModelConfig g2 = fixture("gemma2").config(), g3 = fixture("gemma3").config();
  EXPECT_EQ(g2.activation, Activation::GeluTanh);
  EXPECT_TRUE(g2.post_norms && g2.tied_output && !g2.qk_norm);
  EXPECT_FLOAT_EQ(g2.embedding_scale, std::sqrt(128.0f));
  EXPECT_EQ(g2.attention_softcap, 4.0f);
  EXPECT_EQ(g2.final_softcap, 3.0f);
  EXPECT_EQ(g2.sliding_window, 8u);
  EXPECT_EQ(g2.sliding_layers, (std::vector<bool>{true, false}));
  EXPECT_EQ(g2.sliding_rope, g2.rope);  // gemma2's windowed layers rotate as the others
  EXPECT_TRUE(g3.qk_norm && g3.post_norms);
  EXPECT_EQ(g3.final_softcap, 0.0f);
  EXPECT_EQ(g3.rope.freq_base, 1e6f);
  EXPECT_EQ(g3.sliding_rope.freq_base, 1e4f);
  const ModelConfig m3 = fixture("mistral3").config();
  EXPECT_EQ(m3.attention_temperature_scale, 0.5f);
  EXPECT_EQ(m3.attention_temperature_floor, 8u);
  EXPECT_EQ(fixture("phi3").config().rope.layout, RopeLayout::Neox);
}

// A windowed layer keeps only what a later query can see (whole blocks, plus the fp16 tail of
// methods that keep one); the global layer keeps everything.
TEST(Architectures, ASlidingWindowBoundsWhatTheCacheKeeps) {
  const Model model = fixture("gemma3");
  for (const std::string spec : {"fp16", "kivi:residual=32", "turboquant_mse:bits=4", "snapkv:budget=64+kivi:residual=32"}) {
    SCOPED_TRACE(spec);
    Session s(model, {.kv_spec = spec});
    s.eval(some_tokens(model, 100), Logits::None);
    for (int32_t t : some_tokens(model, 200)) s.eval(std::vector<int32_t>{t}, Logits::None);
    const KVCache& windowed = s.caches()[0];
    const KVCache& global = s.caches()[1];
    EXPECT_EQ(windowed.tokens(), 300u);
    // kivi: 32 fp16 tokens, up to two 32-token key blocks partly in the window and the window.
    EXPECT_LE(windowed.stored_tokens(0), spec == "fp16" ? 8u : 32u + 64u + 8u);
    if (spec.find("snapkv") == std::string::npos) {
      EXPECT_EQ(global.stored_tokens(0), 300u);
    }
    const std::vector<int64_t> kept = windowed.positions(0);
    EXPECT_EQ(kept.back(), 299);
  }
}

// Dropping what lies outside the window changes nothing the queries see: one token at a time
// (a drop after every step) gives the logits of the whole sequence in one step (no drop).
TEST(Architectures, DroppingOutsideTheWindowLeavesTheLogitsAlone) {
  const Model model = fixture("gemma2");
  const std::vector<int32_t> tokens = some_tokens(model, 48);
  Session whole(model, {.kv_spec = "fp16"}), stepped(model, {.kv_spec = "fp16"});
  EXPECT_LT(test::stepped_vs_whole(whole, stepped, tokens), 1e-4);
  EXPECT_LE(stepped.caches()[0].stored_tokens(0), 8u);
  EXPECT_LE(whole.caches()[0].stored_tokens(0), 8u);  // dropped at the end of its one step
}

TEST(Architectures, TheObserverRefusesAttentionItDoesNotModel) {
  const Model gemma = fixture("gemma2");
  const ModelConfig& c = gemma.config();
  CacheObserver observer(c.layers, c.kv_heads, c.heads, c.head_dim, c.rope);
  Session s(gemma, {.kv_spec = "fp16"});
  EXPECT_THROW(s.set_observer(&observer), Error);
  Session plain(fixture("qwen3"), {.kv_spec = "fp16"});
  EXPECT_NO_THROW(plain.set_observer(&observer));
}

}  // namespace
}  // namespace veloxquant
