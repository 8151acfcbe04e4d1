// ratequant: the properties RateQuant (Zuo et al., arXiv 2605.06675) rests on. Reverse
// water-filling is Theorem 2's closed form where nothing clamps and equalizes the distortion of
// every unit it does not clamp; the integer allocation keeps the average and gives more sensitive
// heads more bits; the fitted model recovers a known one; a cache stores each head at its width
// and counts its bytes exactly; wrong inner quantizers and missing or mismatched calibration are
// refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "codecs/ratequant/allocation.h"
#include "codecs/ratequant/water_filling.h"
#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

using ratequant::allocate_bits;
using ratequant::fit_distortion_model;
using ratequant::water_fill;

double mean(const std::vector<double>& x) { return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size()); }

TEST(RateQuant, WaterFillingIsTheClosedFormWhenNothingClamps) {
  const std::vector<double> alpha{1.0, 3.0, 0.5, 8.0, 2.0};
  const double beta = 4.0, avg = 3.0;
  const std::vector<double> b = water_fill(alpha, beta, avg, 0.0, 10.0);
  double mean_log = 0;
  for (double a : alpha) mean_log += std::log(a) / static_cast<double>(alpha.size());
  for (size_t i = 0; i < alpha.size(); ++i) {
    EXPECT_NEAR(b[i], avg + (std::log(alpha[i]) - mean_log) / std::log(beta), 1e-9) << "unit " << i;
  }
  EXPECT_NEAR(mean(b), avg, 1e-9);
}

TEST(RateQuant, WaterFillingLevelsTheDistortionOfEveryUnclampedUnit) {
  const std::vector<double> alpha{0.001, 0.5, 1.0, 2.0, 4.0, 1000.0};
  const double beta = 3.0, avg = 3.0, lo = 1.0, hi = 5.0;
  const std::vector<double> b = water_fill(alpha, beta, avg, lo, hi);
  EXPECT_NEAR(mean(b), avg, 1e-9);
  EXPECT_EQ(b.front(), lo);  // already below the water level at the fewest bits
  EXPECT_EQ(b.back(), hi);   // would need more than the most
  double level = -1;
  for (size_t i = 1; i + 1 < b.size(); ++i) {
    ASSERT_GT(b[i], lo);
    ASSERT_LT(b[i], hi);
    const double d = alpha[i] * std::pow(beta, -b[i]);
    if (level < 0) level = d;
    EXPECT_NEAR(d / level, 1.0, 1e-9) << "unit " << i;  // the water level theta
  }
}

// Sensitivities spread over three orders of magnitude, in a shuffled order.
std::vector<double> spread_alpha(size_t n) {
  std::vector<double> alpha(n);
  for (size_t i = 0; i < n; ++i) alpha[i] = std::pow(10.0, 3.0 * static_cast<double>((i * 7) % n) / static_cast<double>(n));
  return alpha;
}

void expect_more_bits_for_more_sensitive(const std::vector<double>& alpha, const std::vector<int>& bits) {
  for (size_t i = 0; i < alpha.size(); ++i) {
    for (size_t j = 0; j < alpha.size(); ++j) {
      if (alpha[i] > alpha[j]) {
        EXPECT_GE(bits[i], bits[j]) << "alpha " << alpha[i] << " vs " << alpha[j];
      }
    }
  }
}

TEST(RateQuant, IntegerAllocationKeepsTheAverageAndFollowsSensitivity) {
  const std::vector<double> alpha = spread_alpha(24);
  const std::vector<int> contiguous{1, 2, 3, 4, 5, 6, 7, 8};
  for (double avg : {1.5, 2.5, 3.0, 4.25}) {
    const std::vector<int> bits = allocate_bits(alpha, 4.0, avg, contiguous);
    // Contiguous widths reach the budget exactly: the whole bits within avg * units.
    EXPECT_EQ(std::accumulate(bits.begin(), bits.end(), 0L), static_cast<long>(std::floor(avg * 24))) << avg;
    expect_more_bits_for_more_sensitive(alpha, bits);
    EXPECT_GT(*std::max_element(bits.begin(), bits.end()), *std::min_element(bits.begin(), bits.end()));
  }
  // KIVI's widths 2, 4, 8: never above the budget, within one smallest step below it.
  const std::vector<int> kivi{2, 4, 8};
  for (double avg : {2.0, 2.5, 3.0, 5.0}) {
    const std::vector<int> bits = allocate_bits(alpha, 4.0, avg, kivi);
    const long sum = std::accumulate(bits.begin(), bits.end(), 0L);
    EXPECT_LE(sum, avg * 24) << avg;
    EXPECT_GT(sum, avg * 24 - 2) << avg;
    expect_more_bits_for_more_sensitive(alpha, bits);
    for (int b : bits) EXPECT_TRUE(b == 2 || b == 4 || b == 8) << b;
  }
  EXPECT_CONTAINS(test::error_message<SpecError>([&] { allocate_bits(alpha, 4.0, 1.5, kivi); }), "avg=1.5");
}

TEST(RateQuant, IntegerAllocationBeatsUniformUnderTheModel) {
  const std::vector<double> alpha = spread_alpha(16);
  const double beta = 4.0;
  const auto modelled = [&](const std::vector<int>& bits) {
    double d = 0;
    for (size_t i = 0; i < bits.size(); ++i) d += alpha[i] * std::pow(beta, -bits[i]);
    return d;
  };
  for (int avg : {2, 3, 4}) {
    const std::vector<int> bits = allocate_bits(alpha, beta, avg, std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
    EXPECT_LT(modelled(bits), 0.5 * modelled(std::vector<int>(alpha.size(), avg))) << avg << " bits";
  }
}

TEST(RateQuant, FitRecoversAKnownDistortionModel) {
  const std::vector<int> levels{2, 4, 8};
  const std::vector<double> alpha{0.3, 2.0, 50.0};
  std::vector<std::vector<double>> d;
  for (double a : alpha) {
    d.emplace_back();
    for (int b : levels) d.back().push_back(a * std::pow(3.7, -b));
  }
  const ratequant::DistortionModel m = fit_distortion_model(d, levels);
  EXPECT_NEAR(m.beta, 3.7, 1e-9);
  for (size_t i = 0; i < alpha.size(); ++i) EXPECT_NEAR(m.alpha[i] / alpha[i], 1.0, 1e-9);
  const std::vector<std::vector<double>> flat{{1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}};
  EXPECT_CONTAINS(test::error_message<Error>([&] { fit_distortion_model(flat, levels); }), "does not fall with bits");
}

// Four KV heads whose values grow with the head (x1, x3, x9, x27): the later heads' attention
// outputs are the more sensitive to the same relative error.
struct Calibrated {
  static constexpr size_t heads = 4, dim = 64, tokens = 1024;
  SyntheticKV w = make_synthetic_kv(tokens, heads, dim, 1, 1, 11);
  LayerShape shape{heads, dim, 0, 0, 2};
  explicit Calibrated(const std::string& spec) {
    for (size_t t = 0; t < tokens; ++t)
      for (size_t h = 0; h < heads; ++h)
        for (size_t c = 0; c < dim; ++c) w.values[(t * heads + h) * dim + c] *= static_cast<float>(std::pow(3.0, h));
    const CalibrationSamples s{w.keys, w.values, tokens, heads, dim, 256};
    shape.calibration = calibrate_on_samples(parse_spec(spec), s, shape.layers);
  }
};

TEST(RateQuant, MoreSensitiveHeadsGetMoreBitsAndTheAverageHolds) {
  const std::string spec = "ratequant:avg=3+turboquant_mse";
  const Calibrated c(spec);
  const std::vector<std::vector<int>> bits = ratequant::allocate_model(parse_spec(spec).params, c.shape);
  ASSERT_EQ(bits.size(), 2u);
  long sum = 0;
  for (const auto& layer : bits) {
    ASSERT_EQ(layer.size(), Calibrated::heads);
    for (size_t h = 0; h + 1 < layer.size(); ++h) EXPECT_LE(layer[h], layer[h + 1]) << "head " << h;
    EXPECT_LT(layer.front(), layer.back());
    sum += std::accumulate(layer.begin(), layer.end(), 0L);
  }
  EXPECT_EQ(sum, 3 * 2 * static_cast<long>(Calibrated::heads));  // turboquant_mse takes every width 1..8
  // What `veloxquant calibrate` prints: each layer's widths, heads joined by '/'.
  std::string line = "bits per layer:";
  for (const auto& layer : bits) {
    line += ' ';
    for (size_t h = 0; h < layer.size(); ++h) {
      if (h) line += '/';
      line += std::to_string(layer[h]);
    }
  }
  EXPECT_EQ(find_method("ratequant").describe_calibration(parse_spec(spec).params, c.shape), line + " (mean 3)");
  // per=layer: the heads of a layer share one width.
  const std::string per_layer = "ratequant:avg=3,per=layer+turboquant_mse";
  const Calibrated l(per_layer);
  for (const auto& layer : ratequant::allocate_model(parse_spec(per_layer).params, l.shape)) {
    EXPECT_TRUE(std::all_of(layer.begin(), layer.end(), [&](int b) { return b == layer[0]; }));
  }
}

TEST(RateQuant, TheCacheStoresEachHeadAtItsWidthAndCountsItsBytes) {
  const std::string spec = "ratequant:avg=3+turboquant_mse";
  const Calibrated c(spec);
  const std::vector<int> bits = ratequant::allocate_model(parse_spec(spec).params, c.shape)[0];
  KVCache cache(spec, c.shape);
  const size_t n = 200, d = Calibrated::dim;
  cache.append(TensorView::f32(c.w.keys.data(), {n, Calibrated::heads, d}),
               TensorView::f32(c.w.values.data(), {n, Calibrated::heads, d}));
  const LayerCodecs codecs = parse_spec(spec).method->make(parse_spec(spec).params, c.shape);
  size_t key_bytes = 0, value_bytes = 0;
  std::vector<const Codec*> distinct;
  for (size_t h = 0; h < Calibrated::heads; ++h) {
    // The head's codes are those of turboquant_mse at the head's width.
    const std::string b = std::to_string(bits[h]);
    const LayerCodecs alone = find_method("turboquant_mse").make(parse_spec("turboquant_mse:bits=" + b + ",vbits=" + b).params,
                                                                 c.shape);
    EXPECT_EQ(cache.key_streams()[h].codes.size(), alone.key->code_bytes(n)) << "head " << h;
    EXPECT_EQ(cache.value_streams()[h].codes.size(), alone.value->code_bytes(n)) << "head " << h;
    key_bytes += alone.key->code_bytes(n);
    value_bytes += alone.value->code_bytes(n);
    if (std::find(distinct.begin(), distinct.end(), codecs.head_keys[h].get()) == distinct.end()) {
      distinct.push_back(codecs.head_keys[h].get());
      key_bytes += alone.key->state_bytes();
      value_bytes += alone.value->state_bytes();
    }
  }
  EXPECT_EQ(cache.key_bytes(), key_bytes);
  EXPECT_EQ(cache.value_bytes(), value_bytes);
  EXPECT_GT(distinct.size(), 1u);
}

TEST(RateQuant, ComposesWithAQuantizerInTheSpec) {
  const Spec s = parse_spec("ratequant:avg=2.5+kivi:group=64");
  EXPECT_EQ(s.method->name, "ratequant");
  EXPECT_EQ(s.to_string(), "ratequant:avg=2.5,per=head,sequences=8+kivi:kbits=2,vbits=2,group=64,residual=128");
  EXPECT_EQ(parse_spec(s.to_string()), s);
  EXPECT_EQ(parse_spec("ratequant").to_string(), "ratequant:avg=2.5,per=head,sequences=8+kivi:kbits=2,vbits=2,group=32,residual=128");
  const Spec e = parse_spec("snapkv:budget=1024+ratequant:avg=3+turboquant_mse");
  EXPECT_EQ(e.eviction->name, "snapkv");
  EXPECT_EQ(parse_spec(e.to_string()), e);
  EXPECT_NE(parse_spec("ratequant:avg=3+kivi"), parse_spec("ratequant:avg=3+turboquant_mse"));
}

TEST(RateQuant, RefusesInnerQuantizersWithoutOneWidthPerHead) {
  const auto refused = [](const char* spec) { return test::error_message<SpecError>([&] { parse_spec(spec); }); };
  const std::string no_bits = refused("ratequant+qjl");
  EXPECT_CONTAINS(no_bits, "no integer bit-width parameter");
  EXPECT_CONTAINS(no_bits, "kivi, ");  // the quantizers that can be wrapped
  EXPECT_CONTAINS(no_bits, "turboquant_mse");
  EXPECT_EQ(no_bits.find("svdq"), std::string::npos) << no_bits;
  EXPECT_CONTAINS(refused("ratequant+kvquant_nuq"), "calibrated itself");
  EXPECT_CONTAINS(refused("ratequant+svdq"), "fits its codecs");
  EXPECT_CONTAINS(refused("ratequant+xquant"), "pairs of layers");
  EXPECT_CONTAINS(refused("ratequant+ratequant"), "a wrapper itself");
  EXPECT_CONTAINS(refused("ratequant+h2o"), "an eviction policy");
  EXPECT_CONTAINS(refused("ratequant+kivi+fp16"), "continues after ratequant's inner quantizer");
  EXPECT_CONTAINS(refused("ratequant:avg=9"), "avg");
}

TEST(RateQuant, ExplicitWidthsPerLayerOrPerHeadNeedNoCalibration) {
  // bits= instead of an allocation: each head stores what the quantizer stores at its width alone.
  const size_t n = 200, d = 64, heads = 2;
  const SyntheticKV w = make_synthetic_kv(n, heads, d, 1, 1, 7);
  const auto stored = [&](const std::string& spec, int layer) {
    std::vector<KVCache> caches = make_layer_caches(parse_spec(spec), LayerShape{heads, d, 0, 3}, 3);
    KVCache& c = caches[static_cast<size_t>(layer)];
    c.append(TensorView::f32(w.keys.data(), {n, heads, d}), TensorView::f32(w.values.data(), {n, heads, d}));
    return std::vector<size_t>{c.key_streams()[0].codes.size(), c.key_streams()[1].codes.size(),
                               c.value_streams()[0].codes.size(), c.value_streams()[1].codes.size()};
  };
  const auto alone = [&](int a, int b) {
    const std::vector<size_t> x = stored("kivi:kbits=" + std::to_string(a) + ",vbits=" + std::to_string(a),
                                         0);
    const std::vector<size_t> y = stored("kivi:kbits=" + std::to_string(b) + ",vbits=" + std::to_string(b),
                                         0);
    return std::vector<size_t>{x[0], y[1], x[2], y[3]};
  };
  EXPECT_EQ(stored("ratequant:bits=2/4/8+kivi", 1), alone(4, 4));  // one width per layer
  EXPECT_EQ(stored("ratequant:bits=2/4/8+kivi", 2), alone(8, 8));
  EXPECT_EQ(stored("ratequant:bits=2/8/4/2/8/4+kivi", 1), alone(4, 2));  // one per KV head, layer-major
  EXPECT_EQ(stored("ratequant:bits=2/8/4/2/8/4+kivi", 2), alone(8, 4));
  const auto refusal = [&](const std::string& spec) {
    return test::error_message<SpecError>([&] {
      make_layer_caches(parse_spec(spec), LayerShape{heads, d, 0, 3}, 3);
    });
  };
  EXPECT_CONTAINS(
      refusal("ratequant:bits=2/4+kivi"),
      "bits= names 2 widths for 3 layers of 2 KV heads; expected 3 (one per layer) or 6 (one per KV head");
  EXPECT_CONTAINS(refusal("ratequant:bits=2/9/4+kivi"),
                  "bits entry 2 is '9'; expected a whole width in 2..8");
  EXPECT_CONTAINS(refusal("ratequant:bits=2/3/4+kivi"),
                  "kivi: vbits=3 is not supported");  // the quantizer's own
  EXPECT_CONTAINS(refusal("ratequant:bits=2//3+kivi"), "bits entry 2 is ''");
  EXPECT_CONTAINS(refusal("ratequant:bits=2/x/3+kivi"), "bits entry 2 is 'x'");
  // Widths named need no calibration, and calibrating them is refused.
  const SyntheticKV cal = make_synthetic_kv(512, heads, d, 1, 1, 8);
  EXPECT_CONTAINS(test::error_message<SpecError>([&] {
                    calibrate_on_samples(parse_spec("ratequant:bits=2/4/8+kivi"),
                                         {cal.keys, cal.values, 512, heads, d, 0}, 3);
                  }),
                  "bits=2/4/8 names the widths, which need no calibration");
}

TEST(RateQuant, RefusesMissingOrMismatchedCalibration) {
  const LayerShape bare{4, 64, 0, 0, 2};
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache("ratequant:avg=3+turboquant_mse", bare); }),
                  "veloxquant calibrate");
  const Calibrated c("ratequant:avg=3+turboquant_mse");
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache("ratequant:avg=2.5+turboquant_mse", c.shape); }),
                  "ratequant:avg=3");
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache("ratequant:avg=3+kivi", c.shape); }), "calibrate again");
  LayerShape fewer = c.shape;
  fewer.kv_heads = 2;
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache("ratequant:avg=3+turboquant_mse", fewer); }), "KV heads");
  EXPECT_CONTAINS(test::error_message<SpecError>([&] {
                    const Calibrated low("ratequant:avg=1.5+kivi");
                    KVCache("ratequant:avg=1.5+kivi", low.shape);
                  }),
                  "below the fewest bits");
}

TEST(RateQuant, RefusesDamagedTables) {
  const std::string spec = "ratequant:avg=3+turboquant_mse";
  const Calibrated c(spec);
  const auto damaged = [&](const char* table, size_t at, float value) {
    auto a = std::make_shared<CalibrationArtifact>(*c.shape.calibration);
    a->layers[1].heads[2][table][at] = value;
    LayerShape s = c.shape;
    s.calibration = a;
    return test::error_message<FormatError>([&] { KVCache(spec, s); });
  };
  EXPECT_CONTAINS(damaged("distortion", 3, std::nanf("")), "layer 1 KV head 2 at 4 bits");
  EXPECT_CONTAINS(damaged("distortion", 0, -1.0f), "expected a finite value >= 0");
  EXPECT_CONTAINS(damaged("bits", 2, 5.0f), "measured at 5 bits");
}

}  // namespace
}  // namespace veloxquant
