// kvquant_nuq: the properties KVQuant (Hooper et al., NeurIPS 2024) rests on. Non-uniform levels
// beat a uniform grid at equal bits on non-uniform data; the sparse outliers and the first token
// come back exactly; the layout is the documented one; damaged codes are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "codec_test_helpers.h"
#include "codecs/kvquant/kvquant_codec.h"
#include "codecs/kvquant/kvquant_fit.h"
#include "core/bitpack.h"
#include "core/half_bytes.h"
#include "core/nuq_levels.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/rope.h"

namespace veloxquant {
namespace {

using kvquant::Axis;
using kvquant::HeadTables;
using kvquant::KvquantCodec;

float fp16(float x) { return f16_to_f32(f32_to_f16(x)); }

std::vector<float> uniform_levels(size_t n) {
  std::vector<float> l(n);
  for (size_t i = 0; i < n; ++i) l[i] = -1.0f + 2.0f * (static_cast<float>(i) + 0.5f) / static_cast<float>(n);
  return l;
}

double level_mse(const std::vector<float>& u, const std::vector<float>& levels) {
  double e = 0;
  for (float x : u) {
    const float y = levels[nearest_level(levels, x)];
    e += (x - y) * static_cast<double>(x - y);
  }
  return e / static_cast<double>(u.size());
}

// Gaussian samples clipped to [-1, 1] at 3 sigma: dense in the middle, as normalized keys are.
std::vector<float> bell_samples(size_t n, uint64_t seed) {
  std::vector<float> u = test::gaussian(n, seed, 1.0 / 3.0);
  for (float& x : u) x = std::clamp(x, -1.0f, 1.0f);
  return u;
}

TEST(KvquantNuq, KmeansLevelsBeatAUniformGridAtEqualBits) {
  const std::vector<float> fit = bell_samples(20000, 1), held_out = bell_samples(20000, 2);
  const std::vector<float> ones(fit.size(), 1.0f);
  for (size_t bits : {2, 3, 4}) {
    const std::vector<float> nuq = weighted_kmeans_1d(fit, ones, size_t{1} << bits);
    ASSERT_TRUE(std::is_sorted(nuq.begin(), nuq.end()));
    const double a = level_mse(held_out, nuq), b = level_mse(held_out, uniform_levels(size_t{1} << bits));
    EXPECT_LT(a, 0.8 * b) << bits << " bits: NUQ " << a << ", uniform " << b;
  }
}

TEST(KvquantNuq, ActivationWeightsPullLevelsTowardLargeValues) {
  const std::vector<float> u = bell_samples(20000, 3);
  std::vector<float> ones(u.size(), 1.0f), squares(u.size());
  for (size_t i = 0; i < u.size(); ++i) squares[i] = u[i] * u[i];
  const std::vector<float> plain = weighted_kmeans_1d(u, ones, 8);
  const std::vector<float> weighted = weighted_kmeans_1d(u, squares, 8);
  EXPECT_GT(weighted.back(), plain.back());
  EXPECT_LT(weighted.front(), plain.front());
}

TEST(KvquantNuq, KeyThresholdsAreTheOutlierQuantilesOfEachChannel) {
  // One channel holding 0..999 in order, the sequence's first token (the sink) excluded.
  const size_t tokens = 1001;
  std::vector<float> keys(tokens), values(tokens, 1.0f);
  keys[0] = 1e4f;  // the sink: left out of the fit
  for (size_t t = 1; t < tokens; ++t) keys[t] = static_cast<float>(t - 1);
  kvquant::FitConfig cfg;
  cfg.outliers = 0;
  cfg.outlier_fraction = 0.02;
  const kvquant::FittedHead f = kvquant::fit_head(keys.data(), values.data(), tokens, 1, 1, 0, cfg);
  EXPECT_NEAR(f.lo[0], 10.0f, 1.0f);
  EXPECT_NEAR(f.hi[0], 989.0f, 1.0f);
}

// A layer of one KV head: a synthetic draw's first 512 tokens evaluated, the 2048 after them
// calibrated on (the same channel statistics: a draw's statistics come from its seed).
struct Fitted {
  static constexpr size_t tokens = 512;
  std::vector<float> keys, values;
  LayerShape shape{1, 128, 0, 0};
  explicit Fitted(const std::string& spec) {
    const SyntheticKV w = make_synthetic_kv(tokens + 2048, 1, 128, 1, 1, 9);
    keys.assign(w.keys.begin(), w.keys.begin() + tokens * 128);
    values.assign(w.values.begin(), w.values.begin() + tokens * 128);
    const CalibrationSamples held_out{std::span(w.keys).subspan(tokens * 128), std::span(w.values).subspan(tokens * 128),
                                      2048, 1, 128, 0};
    shape.calibration = calibrate_on_samples(parse_spec(spec), held_out);
  }
  LayerCodecs codecs(const std::string& spec) const { return parse_spec(spec).method->make(parse_spec(spec).params, shape); }
};

TEST(KvquantNuq, CalibratedLevelsBeatAUniformGridInTheCodec) {
  const std::string spec = "kvquant_nuq:bits=3,sink=false,weight=uniform";
  const Fitted f(spec);
  const LayerCalibration& cal = f.shape.calibration->layers[0];
  const auto lo = cal.table(0, "unrotated_key.lo", 128), hi = cal.table(0, "unrotated_key.hi", 128);
  const auto levels = cal.table(0, "unrotated_key.levels", 8);
  auto key_error = [&](std::vector<float> l) {
    std::vector<HeadTables> t{{std::move(l), {lo.begin(), lo.end()}, {hi.begin(), hi.end()}}};
    const KvquantCodec proto(128, Axis::PerChannel, {3, 1, false}, std::move(t));
    const auto codec = proto.with_states({{}}, 0);
    return test::sq_error(f.keys, test::round_trip(*codec, f.keys, f.tokens));
  };
  const double nuq = key_error({levels.begin(), levels.end()}), uniform = key_error(uniform_levels(8));
  EXPECT_LT(nuq, 0.9 * uniform) << "NUQ " << nuq << ", uniform " << uniform;
}

TEST(KvquantNuq, OutliersComeBackExactly) {
  const Fitted f("kvquant_nuq:outliers=0.05");
  const LayerCodecs c = f.codecs("kvquant_nuq:outliers=0.05");  // 6 of 128 per vector
  std::vector<float> x = f.keys;
  const size_t n = 64, d = 128;
  Rng rng(5);
  for (size_t t = 1; t < n; ++t) {
    for (int j = 0; j < 6; ++j) x[t * d + rng.next_u64() % d] = 3000.0f + static_cast<float>(t * 10 + j);
  }
  for (const Codec* proto : {c.key.get(), c.value.get()}) {
    const auto codec = codec_for_stream(*proto, x.data(), n);
    const std::vector<float> y = test::round_trip(*codec, std::vector<float>(x.begin(), x.begin() + n * d), n);
    for (size_t i = d; i < n * d; ++i) {
      if (x[i] >= 3000.0f) {
        ASSERT_EQ(y[i], fp16(x[i])) << "token " << i / d << " channel " << i % d;
      }
    }
  }
}

TEST(KvquantNuq, TheFirstTokenOfAStreamIsExact) {
  const std::string spec = "kvquant_nuq";
  const LayerShape shape = with_synthetic_calibration(parse_spec(spec), LayerShape{2, 128, 0, 0}, 3);
  const SyntheticKV w = make_synthetic_kv(100, 2, 128, 1, 1, 4);
  KVCache cache(parse_spec(spec), shape);
  cache.append(TensorView::f32(w.keys.data(), {40, 2, 128}), TensorView::f32(w.values.data(), {40, 2, 128}));
  cache.append(TensorView::f32(w.keys.data() + 40 * 256, {60, 2, 128}),
               TensorView::f32(w.values.data() + 40 * 256, {60, 2, 128}));
  const std::vector<float> k = cache.decode_keys(), v = cache.decode_values();
  for (size_t i = 0; i < 256; ++i) {
    ASSERT_EQ(k[i], fp16(w.keys[i])) << i;
    ASSERT_EQ(v[i], fp16(w.values[i])) << i;
  }
  // The rest is quantized: not all of it comes back exactly.
  EXPECT_GT(test::sq_error(std::vector<float>(w.keys.begin() + 256, w.keys.end()),
                           std::vector<float>(k.begin() + 256, k.end())), 0.0);
}

TEST(KvquantNuq, KeysAreQuantizedBeforeRope) {
  // The paper's order: the cache stores keys as they were before RoPE, so one key codes the same at
  // position 1 and at position 2,999, and decodes rotated to where it sits.
  const std::string spec = "kvquant_nuq:sink=false";
  const LayerShape shape = with_synthetic_calibration(parse_spec(spec), LayerShape{1, 128, 0, 0}, 3);
  RopeParams rope;
  rope.dims = 128;
  constexpr size_t n = 3000;
  const SyntheticKV w = make_synthetic_kv(1, 1, 128, 1, 1, 5);
  std::vector<float> keys(n * 128), values(n * 128);
  std::vector<int64_t> positions(n);
  for (size_t t = 0; t < n; ++t) {
    std::copy_n(w.keys.data(), 128, keys.data() + t * 128);
    std::copy_n(w.values.data(), 128, values.data() + t * 128);
    positions[t] = static_cast<int64_t>(t);
  }
  KVCache cache(parse_spec(spec), shape);
  cache.append(TensorView::f32(keys.data(), {n, 1, 128}), TensorView::f32(values.data(), {n, 1, 128}),
               positions, rope);
  const std::vector<uint8_t>& codes = cache.key_streams()[0].codes;
  ASSERT_EQ(codes.size() % n, 0u);
  const auto record = static_cast<std::ptrdiff_t>(codes.size() / n);
  EXPECT_TRUE(std::equal(codes.begin() + record, codes.begin() + 2 * record, codes.end() - record));
  // Decoded, each is the one unrotated reconstruction turned to its own position.
  const std::vector<float> k = cache.decode_keys();
  std::vector<float> early(k.begin() + 128, k.begin() + 256), late(k.end() - 128, k.end());
  apply_rope(rope, early.data(), 1, 128, -1);
  apply_rope(rope, late.data(), 1, 128, -static_cast<int64_t>(n - 1));
  for (size_t c = 0; c < 128; ++c) EXPECT_NEAR(early[c], late[c], 1e-3f * (1.0f + std::fabs(early[c]))) << c;
}

TEST(KvquantNuq, AnArtifactFittedAfterRopeIsRefused) {
  // Tables of the earlier version, fitted to rotated keys, under their old names.
  LayerShape shape = with_synthetic_calibration(parse_spec("kvquant_nuq"), LayerShape{1, 128, 0, 0}, 3);
  auto old = std::make_shared<CalibrationArtifact>(*shape.calibration);
  for (LayerCalibration& layer : old->layers) {
    for (auto& head : layer.heads) {
      for (const char* t : {"lo", "hi", "levels"}) {
        auto node = head.extract(std::string("unrotated_key.") + t);
        node.key() = std::string("key.") + t;
        head.insert(std::move(node));
      }
    }
  }
  shape.calibration = old;
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { KVCache("kvquant_nuq:artifacts=DIR", shape); }),
                  "the calibration artifact in 'DIR' was fitted to keys after RoPE");
}

TEST(KvquantNuq, LayoutAndBytesAreTheDocumentedOnes) {
  const Fitted f("kvquant_nuq");
  const LayerCodecs c = f.codecs("kvquant_nuq");  // 3 bits, 1 outlier of 128, sink kept
  const auto& key = dynamic_cast<const KvquantCodec&>(*c.key);
  const auto& value = dynamic_cast<const KvquantCodec&>(*c.value);
  EXPECT_EQ(key.token_bytes(), 48u + 4u);
  EXPECT_EQ(value.token_bytes(), 4u + 48u + 4u);
  EXPECT_EQ(key.code_bytes(10), 520u);
  EXPECT_EQ(key.stream_state_bytes(), 256u);
  EXPECT_EQ(key.state_bytes(), 4u * (8 + 2 * 128));
  EXPECT_EQ(value.state_bytes(), 4u * 8);
  // Without outliers and without the sink there is no sparse slot at all.
  const Fitted g("kvquant_nuq:outliers=0,sink=false,bits=2");
  const LayerCodecs bare = g.codecs("kvquant_nuq:outliers=0,sink=false,bits=2");
  EXPECT_EQ(bare.key->code_bytes(1), 32u);
  EXPECT_EQ(bare.value->code_bytes(1), 36u);
}

// Without the sink a stream's fitted state holds no bytes (the fit only picks its KV head's
// tables): a cache restored from the streams still gets each head's codec and attends as the
// original does.
TEST(KvquantNuq, StreamsWithoutTheSinkRestore) {
  const std::string spec = "kvquant_nuq:sink=false";
  const LayerShape shape = with_synthetic_calibration(parse_spec(spec), LayerShape{2, 128, 0, 0}, 3);
  const SyntheticKV w = make_synthetic_kv(40, 2, 128, 4, 1, 5);
  KVCache cache(parse_spec(spec), shape);
  cache.append(TensorView::f32(w.keys.data(), {40, 2, 128}), TensorView::f32(w.values.data(), {40, 2, 128}));
  ASSERT_TRUE(cache.key_streams()[0].state.empty());
  KVCache restored(parse_spec(spec), shape);
  restored.restore(cache.key_streams(), cache.value_streams());
  std::vector<float> a(8 * 128), b(8 * 128);
  cache.attend(TensorView::f32(w.queries.data(), {1, 8, 128}), a.data());
  restored.attend(TensorView::f32(w.queries.data(), {1, 8, 128}), b.data());
  EXPECT_EQ(a, b);
}

// Each KV head's stream codec holds its own head's tables: a cache of two KV heads counts the
// layer's tables once, as the prototype (every head's) does before the first token.
TEST(KvquantNuq, ACacheCountsEachHeadsTablesOnce) {
  const LayerShape shape = with_synthetic_calibration(parse_spec("kvquant_nuq"), LayerShape{2, 128, 0, 0}, 3);
  const SyntheticKV w = make_synthetic_kv(10, 2, 128, 1, 1, 4);
  KVCache cache(parse_spec("kvquant_nuq"), shape);
  const size_t key_tables = 4 * 2 * (8 + 2 * 128), value_tables = 4 * 2 * 8;
  EXPECT_EQ(cache.key_bytes(), key_tables);
  EXPECT_EQ(cache.value_bytes(), value_tables);
  cache.append(TensorView::f32(w.keys.data(), {10, 2, 128}), TensorView::f32(w.values.data(), {10, 2, 128}));
  // Per KV head: 10 records and the first token's fp16 row.
  EXPECT_EQ(cache.key_bytes(), key_tables + 2 * (10 * (48 + 4) + 256));
  EXPECT_EQ(cache.value_bytes(), value_tables + 2 * (10 * (4 + 48 + 4) + 256));
}

TEST(KvquantNuq, CorruptCodesAreRefused) {
  const Fitted f("kvquant_nuq");
  const LayerCodecs c = f.codecs("kvquant_nuq");
  const auto codec = codec_for_stream(*c.value, f.values.data(), 4);
  const auto& layout = dynamic_cast<const KvquantCodec&>(*codec);
  std::vector<uint8_t> codes(codec->code_bytes(4));
  codec->encode(f.values.data(), 4, codes.data());
  EXPECT_NO_THROW(codec->check_codes(codes.data(), 4));
  uint8_t* second = codes.data() + layout.token_bytes();
  auto refused = [&](const std::string& fragment) {
    EXPECT_CONTAINS(test::error_message<Error>([&] { codec->check_codes(codes.data(), 4); }), fragment);
  };
  std::vector<uint8_t> saved = codes;
  store_half(second + layout.slots_offset(), 128);  // an outlier index past head_dim
  refused("expected < 128");
  codes = saved;
  store_half(second + layout.slots_offset() + 2, 0x7C00);  // +inf as an outlier value
  refused("finite");
  codes = saved;
  store_half(second, f32_to_f16(5.0f));  // lo above hi
  store_half(second + 2, f32_to_f16(-5.0f));
  refused("lo <= hi");
  // The sink mark where no sink is kept.
  const Fitted g("kvquant_nuq:sink=false");
  const LayerCodecs nosink = g.codecs("kvquant_nuq:sink=false");
  const auto plain = codec_for_stream(*nosink.value, f.values.data(), 4);
  std::vector<uint8_t> p(plain->code_bytes(1));
  plain->encode(f.values.data() + 128, 1, p.data());
  store_half(p.data() + dynamic_cast<const KvquantCodec&>(*plain).slots_offset(), kvquant::kSinkSlot);
  EXPECT_CONTAINS(test::error_message<Error>([&] { plain->check_codes(p.data(), 1); }), "keeps no sink");
}

TEST(KvquantNuq, WithoutCalibrationItSaysHowToCalibrate) {
  const std::string message = test::error_message<Error>([] { KVCache cache("kvquant_nuq", LayerShape{1, 128, 0, 0}); });
  EXPECT_CONTAINS(message, "needs calibration");
  EXPECT_CONTAINS(message, "veloxquant calibrate");
  EXPECT_CONTAINS(message, "artifacts=DIR");
}

TEST(KvquantNuq, OutlierFractionMustLeaveADensePart) {
  test::expect_refused_naming("kvquant_nuq:outliers=0.5", "outliers", LayerShape{1, 1, 0, 0});
}

}  // namespace
}  // namespace veloxquant
