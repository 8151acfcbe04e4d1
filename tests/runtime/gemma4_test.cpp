// gemma4 (dense) in the runtime: per-layer head sizes, shared-KV layers and per-layer inputs as
// the loader reads them, every cache method on the fixture, and what is refused (mixture of
// experts, misshapen tensors and keys, features that need one shape for every layer). Its logits
// are checked against the numpy reference in tests/python/test_runtime_logits.py.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "calibrated_specs.h"
#include "dev/fixture_model.h"
#include "fixture_inputs.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

using test::all_finite;
using test::some_tokens;

// Five layers: windowed 0, 1 and 3 (heads of 64, an 8-token window), global 2 and 4 (heads of
// 128, no attn_v); 3 and 4 share the caches of 1 and 2.
dev::Fixture fixture_parts(GgmlType type = GgmlType::F32) {
  return dev::make_fixture({.arch = "gemma4",
                            .type = type,
                            .seed = 5,
                            .shape = {.width = 128,
                                      .heads = 4,
                                      .kv_heads = 2,
                                      .head_dim = 64,
                                      .ffn = 128,
                                      .layers = 5,
                                      .context = 1024}});
}

// The fixture with `change` applied to its parts first.
Model load_changed(const std::function<void(dev::Fixture&)>& change) {
  dev::Fixture f = fixture_parts();
  change(f);
  return test::model_of(f);
}

GgufValue& meta(dev::Fixture& f, const std::string& key) {
  for (auto& [k, v] : f.metadata)
    if (k == key) return v;
  throw Error("fixture has no key " + key);
}

void expect_format_error(const std::function<void(dev::Fixture&)>& change, const std::string& names) {
  try {
    load_changed(change);
    ADD_FAILURE() << "loaded; expected a FormatError naming " << names;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
  }
}

TEST(Gemma4, ReadsEachLayersShape) {
  const ModelConfig c = test::model_of(fixture_parts()).config();
  EXPECT_EQ(c.architecture, "gemma4");
  EXPECT_EQ(c.sliding_layers, (std::vector<bool>{true, true, false, true, false}));
  EXPECT_EQ(c.layer_head_dim, (std::vector<uint32_t>{64, 64, 128, 64, 128}));
  EXPECT_EQ(c.head_dim, 128u);
  for (uint32_t l = 0; l < c.layers; ++l) EXPECT_EQ(c.head_dim_of(l), c.sliding(l) ? 64u : 128u);
  EXPECT_EQ(c.kv_heads_of(4), 2u);
  EXPECT_EQ(c.feed_forward_of(3), 128u);
  EXPECT_FALSE(c.uniform_layers());
  EXPECT_EQ(c.shared_kv_layers, 2u);
  EXPECT_EQ(c.cache_layers(), 3u);
  EXPECT_EQ(c.kv_layer(3), 1u);  // windowed: the last windowed cache layer
  EXPECT_EQ(c.kv_layer(4), 2u);  // global: the last cache layer
  EXPECT_EQ(c.per_layer_embedding, 64u);
  EXPECT_EQ(c.attention_scale, 1.0f);
  EXPECT_TRUE(c.value_norm && c.qk_norm && c.post_norms);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.rope.dims, 128u);
  EXPECT_EQ(c.sliding_rope.dims, 64u);
  ASSERT_NE(c.rope.freq_factors, nullptr);  // the global layers' proportional RoPE
  EXPECT_EQ(c.rope.freq_factors->size(), 64u);
  EXPECT_EQ(c.sliding_rope.freq_factors, nullptr);
  EXPECT_EQ(c.sliding_rope.freq_base, 1e4f);
  EXPECT_EQ(c.rope.freq_base, 1e6f);
  const std::vector<LayerShape> shapes = cache_shapes(c);
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[1].head_dim, 64u);
  EXPECT_EQ(shapes[2].head_dim, 128u);
  EXPECT_EQ(shapes[1].window, 8u);
  EXPECT_EQ(shapes[2].window, 0u);
}

TEST(Gemma4, SharedKvLayersStoreNoCache) {
  const Model model = test::model_of(fixture_parts());
  Session s(model, {.kv_spec = "fp16"});
  s.eval(some_tokens(model, 20), Logits::Last);
  ASSERT_EQ(s.caches().size(), 3u);
  EXPECT_EQ(s.caches()[1].shape().head_dim, 64u);
  EXPECT_EQ(s.caches()[2].shape().head_dim, 128u);
  EXPECT_EQ(s.caches()[2].tokens(), 20u);
  EXPECT_EQ(s.kv_fp16_bytes(), size_t{2} * 2 * 20 * 2 * (64 + 64 + 128));
}

// Prefill and decode reach the same logits (the caches of shared layers are read, not written,
// so a second append would show here as a position mismatch).
TEST(Gemma4, DecodeMatchesPrefill) {
  const Model model = test::model_of(fixture_parts());
  const std::vector<int32_t> tokens = some_tokens(model, 24);
  Session whole(model, {.kv_spec = "fp16"}), stepped(model, {.kv_spec = "fp16"});
  EXPECT_LT(test::stepped_vs_whole(whole, stepped, tokens), 1e-4);
}

// Every per-layer method runs; cross-layer methods (pairs of layers of one shape) and calibrated
// ones (an artifact of one shape) are refused with the model and the shapes named.
TEST(Gemma4, EveryCacheMethodRunsOrIsRefused) {
  const Model model = test::model_of(fixture_parts());
  const std::vector<int32_t> prompt = some_tokens(model, 72);
  std::vector<std::string> specs;
  for (const MethodInfo& m : registered_methods()) {
    if (m.calibrated()) {
      EXPECT_THROW(test::runnable_spec(model, m.name), Error) << m.name;
      continue;
    }
    specs.push_back(m.name);
  }
  for (const MethodInfo& p : registered_policies()) specs.push_back(p.name + ":budget=64+kivi");
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    if (parse_spec(spec).method->cross_layer()) {
      try {
        Session s(model, {.kv_spec = spec});
        ADD_FAILURE() << "cross-layer spec ran on layers of different shapes";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("gemma4"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("layer 2 has 2 KV heads of 128"), std::string::npos) << e.what();
      }
      continue;
    }
    Session s(model, {.kv_spec = spec});
    ASSERT_TRUE(all_finite(s.eval(prompt, Logits::Last)));
    for (int32_t t : some_tokens(model, 2))
      ASSERT_TRUE(all_finite(s.eval(std::vector<int32_t>{t}, Logits::Last)));
  }
}

TEST(Gemma4, RefusesWhatNeedsOneShapeForEveryLayer) {
  const Model model = test::model_of(fixture_parts());
  Session s(model, {.kv_spec = "fp16"});
  const std::vector<float> logits = s.eval(some_tokens(model, 4), Logits::Last);
  EXPECT_THROW(save_session(s, logits, ::testing::TempDir() + "gemma4.vqs"), Error);
  EXPECT_THROW(Session(model, {.kv_spec = "fp16", .device = Device::Cuda}), Error);
}

TEST(Gemma4, RefusesMixtureOfExperts) {
  expect_format_error(
      [](dev::Fixture& f) {
        f.tensors.push_back(
            {"blk.0.ffn_gate_inp.weight", GgmlType::F32, {128, 4}, std::vector<uint8_t>(128 * 4 * 4)});
      },
      "'blk.0.ffn_gate_inp.weight' routes tokens to experts: a mixture-of-experts gemma4 model");
}

TEST(Gemma4, RefusesBadShapesAndKeys) {
  // A global layer's q projection sized for windowed heads.
  expect_format_error(
      [](dev::Fixture& f) {
        for (auto& t : f.tensors)
          if (t.name == "blk.2.attn_q.weight") t.dims[1] = 4 * 64, t.data.resize(t.data.size() / 2);
      },
      "tensor 'blk.2.attn_q.weight' has shape [128, 256]; expected [128, 512]");
  expect_format_error(
      [](dev::Fixture& f) {
        meta(f, "gemma4.attention.sliding_window_pattern") = GgufValue(GgufValue::Array{
            GgufValueType::Bool, {GgufValue(true), GgufValue(true), GgufValue(false), GgufValue(true)}});
      },
      "gemma4.attention.sliding_window_pattern has 4 flags; expected one per layer (5)");
  expect_format_error(
      [](dev::Fixture& f) {
        meta(f, "gemma4.attention.head_count_kv") = GgufValue(
            GgufValue::Array{GgufValueType::UInt32, {GgufValue(uint32_t{2}), GgufValue(uint32_t{2})}});
      },
      "'gemma4.attention.head_count_kv' has 2 values; expected one per layer (5)");
  expect_format_error(
      [](dev::Fixture& f) {
        std::erase_if(f.metadata,
                      [](const auto& kv) { return kv.first == "gemma4.attention.key_length_swa"; });
      },
      "'gemma4.attention.key_length_swa' is missing");
  expect_format_error(
      [](dev::Fixture& f) {
        std::erase_if(f.tensors, [](const auto& t) { return t.name == "blk.1.proj.weight"; });
      },
      "blk.1.proj.weight");
}

// Per-layer KV heads and feed-forward widths as arrays, one value each, load as uniform ones.
TEST(Gemma4, ReadsPerLayerArrays) {
  const Model model = load_changed([](dev::Fixture& f) {
    GgufValue::Array kv{GgufValueType::UInt32, {}}, ff{GgufValueType::UInt32, {}};
    for (int l = 0; l < 5; ++l) kv.items.emplace_back(uint32_t{2}), ff.items.emplace_back(uint32_t{128});
    meta(f, "gemma4.attention.head_count_kv") = GgufValue(std::move(kv));
    meta(f, "gemma4.feed_forward_length") = GgufValue(std::move(ff));
  });
  EXPECT_EQ(model.config().kv_heads, 2u);
  EXPECT_TRUE(model.config().layer_kv_heads.empty());
  EXPECT_EQ(model.config().feed_forward, 128u);
}

}  // namespace
}  // namespace veloxquant
