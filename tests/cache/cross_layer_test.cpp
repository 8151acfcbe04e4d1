// Cross-layer caches (minicache, xquant) built for a model's layers by make_layer_caches(): the
// conformance checks that need pairs (the suite in conformance_test.cpp builds single caches,
// which store a cross-layer spec with its base quantizer), appends in any layer order, restoring
// pairs and refusing inconsistent ones, session files, and the refusals of the coordinator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

constexpr size_t kHeads = 2, kGroup = 4;
constexpr int kLayers = 4;

// The default spec of a cross-layer method: in a 4-layer model, minicache pairs layers 2 and 3
// (start=0.5), xquant 0 and 1, and 2 and 3.
std::string paired_spec(const std::string& name) { return name; }

// Layer l's workload. An odd layer is close to the one before (as adjacent layers of a model
// are, which is what merging and sharing rely on): its keys and values are mostly the previous
// layer's, and its queries look for what the previous layer's look for.
std::vector<SyntheticKV> workloads(size_t tokens, size_t hd, uint64_t seed) {
  std::vector<SyntheticKV> w;
  for (int l = 0; l < kLayers; ++l) {
    w.push_back(make_synthetic_kv(tokens, kHeads, hd, kGroup, 6, seed + static_cast<uint64_t>(l)));
    if (l % 2 == 1) {
      for (size_t i = 0; i < w[l].keys.size(); ++i) {
        w[l].keys[i] = 0.9f * w[l - 1].keys[i] + 0.1f * w[l].keys[i];
        w[l].values[i] = 0.9f * w[l - 1].values[i] + 0.1f * w[l].values[i];
      }
      w[l].queries = w[l - 1].queries;
    }
  }
  return w;
}

// The runtime's order: every layer appends a chunk, then every layer finishes the step.
std::vector<KVCache> filled(const std::string& spec, const std::vector<SyntheticKV>& w, size_t chunk,
                            uint64_t seed, bool followers_first = false) {
  const size_t hd = w[0].head_dim, row = kHeads * hd;
  std::vector<KVCache> caches = make_layer_caches(parse_spec(spec), LayerShape{kHeads, hd, 0, seed}, kLayers);
  for (size_t t = 0; t < w[0].tokens; t += chunk) {
    const size_t n = std::min(chunk, w[0].tokens - t);
    for (int i = 0; i < kLayers; ++i) {
      const int l = followers_first ? i ^ 1 : i;
      caches[l].append(TensorView::f32(w[l].keys.data() + t * row, {n, kHeads, hd}),
                       TensorView::f32(w[l].values.data() + t * row, {n, kHeads, hd}));
    }
    for (KVCache& c : caches) c.finish_step();
  }
  return caches;
}

// (method name, head_dim)
class CrossLayerConformance : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {
 protected:
  const std::string& name() const { return std::get<0>(GetParam()); }
  size_t dim() const { return std::get<1>(GetParam()); }
};

TEST_P(CrossLayerConformance, CountsBytesExactly) {
  const size_t hd = dim();
  const std::string spec = paired_spec(name());
  const Spec parsed = parse_spec(spec);
  const LayerShape shape{kHeads, hd, 0, 5, kLayers};
  const LayerCodecs base = parsed.method->make(parsed.params, shape);
  const PairCodecs pair = parsed.method->make_pair(parsed.params, shape);
  const std::vector<int> leaders = parsed.method->pair_leaders(parsed.params, kLayers);
  ASSERT_FALSE(leaders.empty());
  for (size_t tokens : {1, 15, 64, 300, 1000}) {
    for (size_t chunk : {1, 7, 256}) {
      if (tokens > 300 && chunk == 1) continue;
      const std::vector<KVCache> caches = filled(spec, workloads(tokens, hd, tokens), chunk, 5);
      size_t total = 0;
      for (int l = 0; l < kLayers; ++l) {
        const bool paired = std::find(leaders.begin(), leaders.end(), l) != leaders.end() ||
                            std::find(leaders.begin(), leaders.end(), l - 1) != leaders.end();
        const bool follower = paired && std::find(leaders.begin(), leaders.end(), l) == leaders.end();
        auto expected = [&](const Codec& c, const PairCodec& p) {
          const size_t b = paired ? p.block_tokens() : c.block_tokens();
          const size_t enc = tokens >= base.residual ? (tokens - base.residual) / b * b : 0;
          const size_t codes = !paired ? c.code_bytes(enc) : follower ? p.follower_bytes(enc) : p.leader_bytes(enc);
          return kHeads * (codes + (tokens - enc) * hd * 2);
        };
        EXPECT_EQ(caches[l].key_bytes(), expected(*base.key, *pair.key)) << tokens << " tokens, chunk " << chunk << ", layer " << l;
        EXPECT_EQ(caches[l].value_bytes(), expected(*base.value, *pair.value)) << tokens << " tokens, chunk " << chunk << ", layer " << l;
        total += caches[l].bytes();
      }
      if (tokens >= 300) {
        size_t fp16 = 0;
        for (const KVCache& c : caches) fp16 += c.fp16_bytes();
        EXPECT_LT(total, fp16);
      }
    }
  }
}

TEST_P(CrossLayerConformance, AppendOrderAndSeedDoNotChangeTheBytes) {
  const std::vector<SyntheticKV> w = workloads(300, dim(), 9);
  const std::vector<KVCache> a = filled(paired_spec(name()), w, 64, 11);
  const std::vector<KVCache> b = filled(paired_spec(name()), w, 64, 11, /*followers_first=*/true);
  for (int l = 0; l < kLayers; ++l) {
    for (size_t h = 0; h < kHeads; ++h) {
      EXPECT_TRUE(a[l].key_streams()[h].codes == b[l].key_streams()[h].codes) << l;
      EXPECT_TRUE(a[l].value_streams()[h].codes == b[l].value_streams()[h].codes) << l;
      EXPECT_TRUE(a[l].key_streams()[h].tail == b[l].key_streams()[h].tail) << l;
    }
    EXPECT_GT(a[l].key_streams()[0].encoded, 0u);
  }
}

// Every layer, merged or shared, attends: fused (on the view's codes) close to the reference,
// and both not far from exact attention on its own keys and values: within 1.5 times the error
// of the base quantizer alone (a cache built alone) on the same layer, plus 0.05.
TEST_P(CrossLayerConformance, FusedMatchesReferenceInEveryLayer) {
  const size_t hd = dim();
  for (size_t tokens : {70, 1000}) {
    const std::vector<SyntheticKV> w = workloads(tokens, hd, 21);
    const std::vector<KVCache> caches = filled(paired_spec(name()), w, 100, 3);
    for (int l = 0; l < kLayers; ++l) {
      KVCache alone(paired_spec(name()), LayerShape{kHeads, hd, l, 3});
      alone.append(TensorView::f32(w[l].keys.data(), {tokens, kHeads, hd}), TensorView::f32(w[l].values.data(), {tokens, kHeads, hd}));
      alone.finish_step();
      const std::vector<float> exact = exact_attention(w[l].queries.data(), 6, w[l].q_heads, w[l].keys.data(),
                                                       w[l].values.data(), tokens, kHeads, hd);
      std::vector<float> fused(exact.size()), ref(exact.size()), decoded(exact.size());
      const TensorView q = TensorView::f32(w[l].queries.data(), {6, w[l].q_heads, hd});
      caches[l].attend(q, fused.data(), AttendPath::Fused);
      caches[l].attend(q, ref.data(), AttendPath::Reference);
      caches[l].attend(q, decoded.data(), AttendPath::Decoded);
      std::vector<float> base(exact.size());
      alone.attend(q, base.data(), AttendPath::Reference);
      const double method_err = test::relative_l2(ref, exact), base_err = test::relative_l2(base, exact);
      EXPECT_LE(test::relative_l2(fused, ref), std::max(1e-4, 0.1 * method_err)) << tokens << " tokens, layer " << l;
      EXPECT_LE(test::relative_l2(decoded, ref), 1e-4) << tokens << " tokens, layer " << l;
      EXPECT_LT(method_err, 1.5 * base_err + 0.05) << tokens << " tokens, layer " << l << ", base alone " << base_err;
    }
  }
}

TEST_P(CrossLayerConformance, KeepsLargeRepresentableValues) {
  std::vector<SyntheticKV> w = workloads(300, dim(), 17);
  for (SyntheticKV& x : w) {
    for (auto& v : x.keys) v = v > 0 ? 60000.0f : -60000.0f;
    for (auto& v : x.values) v = v > 0 ? 50000.0f : -50000.0f;
  }
  const std::vector<KVCache> caches = filled(paired_spec(name()), w, 64, 2);
  for (int l = 0; l < kLayers; ++l) {
    for (float x : caches[l].decode_keys()) ASSERT_TRUE(std::isfinite(x)) << l;
    for (float x : caches[l].decode_values()) ASSERT_TRUE(std::isfinite(x)) << l;
    std::vector<float> out(2 * w[l].q_heads * dim());
    caches[l].attend(TensorView::f32(w[l].queries.data(), {2, w[l].q_heads, dim()}), out.data());
    for (float x : out) ASSERT_TRUE(std::isfinite(x)) << l;
  }
}

// Restoring every layer's streams into fresh caches gives the same bytes and attention; a
// follower whose leader holds other tokens is refused, naming the pair.
TEST_P(CrossLayerConformance, RestoresPairsAndRefusesInconsistentOnes) {
  const size_t hd = dim();
  const std::vector<SyntheticKV> w = workloads(300, hd, 31);
  const std::string spec = paired_spec(name());
  const std::vector<KVCache> saved = filled(spec, w, 100, 3);
  std::vector<KVCache> restored = make_layer_caches(parse_spec(spec), LayerShape{kHeads, hd, 0, 3}, kLayers);
  for (int l = 0; l < kLayers; ++l) restored[l].restore(saved[l].key_streams(), saved[l].value_streams());
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(restored[l].bytes(), saved[l].bytes());
    EXPECT_EQ(restored[l].decode_keys(), saved[l].decode_keys()) << l;
    EXPECT_EQ(restored[l].decode_values(), saved[l].decode_values()) << l;
  }
  const int follower = parse_spec(spec).method->pair_leaders(parse_spec(spec).params, kLayers).front() + 1;
  // A follower saved after fewer tokens than its restored leader holds.
  const std::vector<KVCache> shorter = filled(spec, workloads(200, hd, 31), 100, 3);
  std::vector<KVCache> mixed = make_layer_caches(parse_spec(spec), LayerShape{kHeads, hd, 0, 3}, kLayers);
  mixed[follower - 1].restore(saved[follower - 1].key_streams(), saved[follower - 1].value_streams());
  const std::string message = test::error_message<Error>(
      [&] { mixed[follower].restore(shorter[follower].key_streams(), shorter[follower].value_streams()); });
  EXPECT_CONTAINS(message, "layers " + std::to_string(follower - 1) + " and " + std::to_string(follower) + " are a pair");
  EXPECT_CONTAINS(message, "holds 300 tokens and the restored layer");
  EXPECT_EQ(mixed[follower].tokens(), 0u);  // unchanged
  // The leader's streams where the follower's belong: the follower's layout is refused.
  EXPECT_THROW(mixed[follower].restore(saved[follower - 1].key_streams(), saved[follower - 1].value_streams()), Error);
}

std::vector<std::tuple<std::string, size_t>> cross_layer_params() {
  std::vector<std::tuple<std::string, size_t>> all;
  for (const MethodInfo& m : registered_methods())
    if (m.cross_layer())
      for (size_t d : {size_t{128}, size_t{8}, size_t{80}}) all.emplace_back(m.name, d);
  return all;
}

INSTANTIATE_TEST_SUITE_P(CrossLayerMethods, CrossLayerConformance, ::testing::ValuesIn(cross_layer_params()),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_d" + std::to_string(std::get<1>(param_info.param));
                         });

TEST(CrossLayer, BothMethodsAreRegistered) {
  size_t found = 0;
  for (const MethodInfo& m : registered_methods()) found += m.cross_layer();
  EXPECT_EQ(found, 2u);
  EXPECT_TRUE(find_method("minicache").cross_layer());
  EXPECT_TRUE(find_method("xquant").cross_layer());
  EXPECT_FALSE(find_method("kivi").cross_layer());
}

// A cache built alone has no partner layer: it is the method's base quantizer (KIVI), encoded at
// the end of each step.
TEST(CrossLayer, ACacheBuiltAloneIsTheBaseQuantizer) {
  const SyntheticKV w = make_synthetic_kv(500, kHeads, 128, kGroup, 1, 3);
  for (const auto& [spec, base] : {std::pair{"xquant", "kivi:group=128"}, std::pair{"minicache", "kivi:kbits=4,vbits=4"}}) {
    KVCache alone(spec, LayerShape{kHeads, 128, 0, 0}), kivi(base, LayerShape{kHeads, 128, 0, 0});
    for (KVCache* c : {&alone, &kivi}) {
      c->append(TensorView::f32(w.keys.data(), {500, kHeads, 128}), TensorView::f32(w.values.data(), {500, kHeads, 128}));
      c->finish_step();
    }
    EXPECT_EQ(alone.bytes(), kivi.bytes()) << spec;
    EXPECT_EQ(alone.decode_keys(), kivi.decode_keys()) << spec;
  }
}

TEST(CrossLayer, RefusesEvictionAndBadLayerCounts) {
  EXPECT_CONTAINS(test::error_message<SpecError>([] { KVCache c("h2o:budget=256+xquant", LayerShape{1, 64, 0, 0}); }),
                  "xquant stores adjacent layers' tokens together and an eviction policy drops tokens per layer");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { make_layer_caches(parse_spec("snapkv+minicache"), LayerShape{1, 64, 0, 0}, 4); }),
                  "not supported");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { make_layer_caches(parse_spec("xquant"), LayerShape{1, 64, 0, 0}, 0); }),
                  "got 0 layers; expected at least 1");
  // One layer: no pair fits, the layer is the base quantizer; an odd count leaves the last alone.
  EXPECT_EQ(make_layer_caches(parse_spec("xquant"), LayerShape{1, 64, 0, 0}, 1).size(), 1u);
  EXPECT_EQ(find_method("xquant").pair_leaders(parse_spec("xquant").params, 5), (std::vector<int>{0, 2}));
  EXPECT_EQ(find_method("minicache").pair_leaders(parse_spec("minicache").params, 8), (std::vector<int>{4, 6}));
  EXPECT_EQ(find_method("minicache").pair_leaders(parse_spec("minicache:start=1").params, 8), std::vector<int>{});
}

// A follower whose leader is gone cannot read its codes: attention says so instead of reading freed
// memory.
TEST(CrossLayer, AFollowerWithoutItsLeaderIsAnError) {
  const std::vector<SyntheticKV> w = workloads(300, 64, 41);
  std::vector<KVCache> caches = filled(paired_spec("xquant"), w, 300, 1);
  KVCache follower = std::move(caches[1]);
  caches.clear();
  std::vector<float> out(w[1].q_heads * 64);
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    follower.attend(TensorView::f32(w[1].queries.data(), {1, w[1].q_heads, 64}), out.data());
                  }),
                  "layer 1 reads its encoded tokens through layer 0, which no longer exists");
}

}  // namespace
}  // namespace veloxquant
