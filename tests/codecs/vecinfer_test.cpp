// vecinfer: the properties VecInfer (Yao et al., arXiv 2510.06175) rests on. The smoothing and the
// rotation fold into the query without changing q . k; they flatten outlier channels; ADC scores
// are the decoded keys' products; more k-means centroids lower the distortion; the record is
// dim / dims index bytes; missing or mismatched calibration and damaged codes are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "codec_test_helpers.h"
#include "codecs/vecinfer/key_transform.h"
#include "codecs/vecinfer/vecinfer_key_codec.h"
#include "eval/synthetic_kv.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

using vecinfer::VecinferKeyCodec;

// A layer of `heads` KV heads calibrated on a synthetic draw (outlier channels, a sink), and a
// second draw of the same statistics (the seed's channel layout) to evaluate on.
struct Calibrated {
  static constexpr size_t kCalibration = 2048, kTokens = 512;
  std::vector<float> keys;  // [kTokens, heads, d], not seen by the calibration
  LayerShape shape;
  Calibrated(const std::string& spec, size_t d, size_t heads = 1) : shape{heads, d, 0, 0} {
    const SyntheticKV w = make_synthetic_kv(kCalibration + kTokens, heads, d, 1, 1, 9);
    const size_t row = heads * d;
    keys.assign(w.keys.begin() + kCalibration * row, w.keys.end());
    const CalibrationSamples samples{std::span(w.keys).first(kCalibration * row),
                                     std::span(w.values).first(kCalibration * row), kCalibration, heads, d, 0};
    shape.calibration = calibrate_on_samples(parse_spec(spec), samples);
  }
  LayerCodecs codecs(const std::string& spec) const {
    const Spec s = parse_spec(spec);
    return s.method->make(s.params, shape);
  }
};

double max_over_median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.back() / v[v.size() / 2];
}

// Per channel, the largest |x| over the rows.
std::vector<float> channel_peaks(const std::vector<float>& x, size_t d) {
  std::vector<float> peak(d, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) peak[i % d] = std::max(peak[i % d], std::fabs(x[i]));
  return peak;
}

TEST(Vecinfer, SmoothingFactorsAreTheRootsOfTheChannelPeaks) {
  const size_t d = 4, n = 3;
  const std::vector<float> k = {1, -9, 0, 2,  //
                                -4, 1, 0, 0.25f,
                                2, 3, 0, -16};
  const std::vector<float> lambda = vecinfer::smoothing_factors(k.data(), n, d, d);
  EXPECT_EQ(lambda, (std::vector<float>{2, 3, 1, 4}));  // an all-zero channel gets 1
}

// The artifact holds the factors of the calibration keys, or ones under smooth=false (the
// rotation alone: the paper's ablation).
TEST(Vecinfer, TheArtifactHoldsTheCalibrationKeysFactors) {
  const size_t d = 16, n = 256;
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, 4);
  const CalibrationSamples samples{w.keys, w.values, n, 1, d, 0};
  const auto smoothed = calibrate_on_samples(parse_spec("vecinfer"), samples);
  const auto plain = calibrate_on_samples(parse_spec("vecinfer:smooth=false"), samples);
  const std::span<const float> a = smoothed->layers[0].table(0, "key.smooth", d);
  const std::span<const float> b = plain->layers[0].table(0, "key.smooth", d);
  EXPECT_EQ(std::vector<float>(a.begin(), a.end()), vecinfer::smoothing_factors(w.keys.data(), n, d, d));
  EXPECT_EQ(std::vector<float>(b.begin(), b.end()), std::vector<float>(d, 1.0f));
}

// q' . k' = (R (lambda q)) . (R (k / lambda)) = q . k for any keys, and the keys come back.
TEST(Vecinfer, TheTransformFoldsIntoTheQueryExactly) {
  for (size_t d : {128, 80}) {  // a Hadamard rotation, then a dense one
    const size_t n = 64, nq = 4;
    const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, nq, 3);
    const std::vector<float> lambda = vecinfer::smoothing_factors(w.keys.data(), n, d, d);
    const Rotation r = vecinfer::key_rotation(d);
    std::vector<float> k = w.keys, q = w.queries;
    vecinfer::transform_keys(r, lambda, k.data(), n);
    vecinfer::transform_queries(r, lambda, q.data(), nq);
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < n; ++t) {
        const double truth = test::dot(w.queries.data() + i * d, w.keys.data() + t * d, d);
        const double scale = std::sqrt(test::dot(w.queries.data() + i * d, w.queries.data() + i * d, d) *
                                       test::dot(w.keys.data() + t * d, w.keys.data() + t * d, d));
        EXPECT_NEAR(test::dot(q.data() + i * d, k.data() + t * d, d), truth, 1e-5 * scale) << d << " " << i << " " << t;
      }
    vecinfer::restore_keys(r, lambda, k.data(), n);
    EXPECT_LT(test::relative_l2(k, w.keys), 1e-6) << d;
  }
}

// The paper's motivation: outlier channels dominate raw keys; after smoothing and the rotation
// the largest channel peak is under 3x the median one, from over 4x.
TEST(Vecinfer, TheTransformFlattensOutlierChannels) {
  const size_t d = 128, n = 2048;
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, 5);
  const std::vector<float> lambda = vecinfer::smoothing_factors(w.keys.data(), n, d, d);
  std::vector<float> k = w.keys;
  vecinfer::transform_keys(vecinfer::key_rotation(d), lambda, k.data(), n);
  const double before = max_over_median(channel_peaks(w.keys, d)), after = max_over_median(channel_peaks(k, d));
  EXPECT_GT(before, 4.0);
  EXPECT_LT(after, 3.0) << "before " << before;
}

TEST(Vecinfer, AdcScoresEqualTheDecodedKeysProducts) {
  for (size_t d : {128, 80}) {
    const std::string spec = "vecinfer";
    const Calibrated cal(spec, d);
    const LayerCodecs c = cal.codecs(spec);
    const size_t n = Calibrated::kTokens, nq = 3;
    const auto codec = codec_for_stream(*c.key, cal.keys.data(), n);
    ASSERT_TRUE(codec->fused_score());
    const std::vector<float> queries = test::gaussian(nq * d, 31, 2.0);
    std::vector<uint8_t> codes(codec->code_bytes(n));
    codec->encode(cal.keys.data(), n, codes.data());
    std::vector<float> fused(nq * n), decoded(n * d);
    codec->score(queries.data(), nq, codes.data(), n, fused.data());
    codec->decode(codes.data(), n, decoded.data());
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < n; ++t) {
        const float* q = queries.data() + i * d;
        const float* k = decoded.data() + t * d;
        const double scale = std::sqrt(test::dot(q, q, d) * test::dot(k, k, d));
        ASSERT_NEAR(fused[i * n + t], test::dot(q, k, d), 1e-5 * scale) << d << ": query " << i << " token " << t;
      }
  }
}

// k-means codebooks: each quadrupling of the centroids lowers the held-out distortion, and 256
// centroids of 8 dims (1 bit per element) leave under a fifth of the keys' energy (a Gaussian
// source at 1 bit per element cannot go below a quarter of its variance).
TEST(Vecinfer, MoreCentroidsLowerTheDistortion) {
  const size_t d = 128, n = Calibrated::kTokens;
  double previous = INFINITY, energy = 0;
  for (size_t centroids : {16, 64, 256}) {
    const std::string spec = "vecinfer:centroids=" + std::to_string(centroids);
    const Calibrated cal(spec, d);
    energy = test::dot(cal.keys.data(), cal.keys.data(), cal.keys.size());
    const auto codec = codec_for_stream(*cal.codecs(spec).key, cal.keys.data(), n);
    const double error = test::sq_error(cal.keys, test::round_trip(*codec, cal.keys, n));
    EXPECT_LT(error, 0.85 * previous) << centroids << " centroids";
    previous = error;
  }
  EXPECT_LT(previous, 0.2 * energy);
}

TEST(Vecinfer, ATokenStoresOneIndexBytePerSubVectorPlusItsValue) {
  const size_t d = 128, heads = 2, n = 100;
  const Calibrated cal("vecinfer:dims=4,vbits=3", d, heads);
  const LayerCodecs c = cal.codecs("vecinfer:dims=4,vbits=3");
  EXPECT_EQ(c.key->code_bytes(n), n * 32);
  EXPECT_EQ(c.value->code_bytes(n), n * (4 + 48));  // f32 norm + 128 3-bit codes
  // Per stream (KV head): 128 f32 smoothing factors, 32 codebooks of 256 fp16 centroids of 4.
  // Per layer: the rotation's signs.
  EXPECT_EQ(c.key->stream_state_bytes(), 128 * 4 + 32 * 256 * 4 * 2);
  EXPECT_EQ(c.key->state_bytes(), 128u / 8);
  KVCache cache("vecinfer:dims=4,vbits=3", cal.shape);
  cache.append(TensorView::f32(cal.keys.data(), {n, heads, d}), TensorView::f32(cal.keys.data(), {n, heads, d}));
  EXPECT_EQ(cache.key_bytes(), heads * (n * 32 + c.key->stream_state_bytes()) + c.key->state_bytes());
  EXPECT_EQ(cache.value_bytes(), heads * n * 52 + c.value->state_bytes());
}

TEST(Vecinfer, MissingOrMismatchedCalibrationIsRefused) {
  const std::string missing = test::error_message<Error>([] { KVCache cache("vecinfer", LayerShape{1, 128, 0, 0}); });
  EXPECT_CONTAINS(missing, "needs calibration");
  EXPECT_CONTAINS(missing, "veloxquant calibrate");
  EXPECT_CONTAINS(missing, "--kv vecinfer:");
  const Calibrated cal("vecinfer:dims=8", 128);
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache cache("vecinfer:dims=4", cal.shape); }),
                  "artifact 'vecinfer:dims=8,centroids=256");
  LayerShape other_dim = cal.shape;
  other_dim.head_dim = 64;
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache cache("vecinfer:dims=8", other_dim); }),
                  "head_dim: artifact 128, cache 64");
}

TEST(Vecinfer, DamagedTablesAreRefused) {
  const Calibrated cal("vecinfer", 16);
  auto damaged = [&](const char* name, size_t at, float v) {
    auto a = std::make_shared<CalibrationArtifact>(*cal.shape.calibration);
    a->layers[0].heads[0][name][at] = v;
    LayerShape s = cal.shape;
    s.calibration = a;
    return test::error_message<FormatError>([&] { KVCache cache("vecinfer", s); });
  };
  EXPECT_CONTAINS(damaged("key.smooth", 3, 0.0f), "smoothing factor of key channel 3 of KV head 0 is 0");
  EXPECT_CONTAINS(damaged("key.smooth", 5, NAN), "key channel 5");
  EXPECT_CONTAINS(damaged("key.codebooks", 7, 0.1f), "codebook entry 7 of KV head 0 is 0.1");
  EXPECT_CONTAINS(damaged("key.codebooks", 9, INFINITY), "codebook entry 9");
}

TEST(Vecinfer, CorruptCodesAreRefused) {
  const size_t d = 64, n = 4;
  const Calibrated cal("vecinfer:centroids=100", d);
  const auto codec = codec_for_stream(*cal.codecs("vecinfer:centroids=100").key, cal.keys.data(), n);
  std::vector<uint8_t> codes(codec->code_bytes(n));
  codec->encode(cal.keys.data(), n, codes.data());
  EXPECT_NO_THROW(codec->check_codes(codes.data(), n));
  codes[2 * 8 + 3] = 100;
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec->check_codes(codes.data(), n); }),
                  "token 2 names centroid 100 in sub-space 3; expected one of the 100 centroids");
  // Every byte is a valid index at 256 centroids, and the prototype codes nothing.
  const Calibrated full("vecinfer", d);
  const LayerCodecs c = full.codecs("vecinfer");
  const std::vector<uint8_t> all(c.key->code_bytes(32), 255);
  EXPECT_NO_THROW(codec_for_stream(*c.key, full.keys.data(), 1)->check_codes(all.data(), 32));
  EXPECT_CONTAINS(test::error_message<Error>([&] { test::round_trip(*c.key, full.keys, 1); }), "prototype");
}

// A stream's state (its KV head's tables, as a session file holds them) is checked when read back.
TEST(Vecinfer, DamagedStreamStatesAreRefused) {
  const size_t d = 16;
  const Calibrated cal("vecinfer", d);
  const LayerCodecs c = cal.codecs("vecinfer");
  const std::vector<std::vector<uint8_t>> good = c.key->fit_streams(cal.keys.data(), 1, 1);
  ASSERT_EQ(good[0].size(), c.key->stream_state_bytes());
  EXPECT_NO_THROW((void)c.key->with_states(good, 0));
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states({{1, 2}}, 0); }),
                  "holds 2 bytes; expected 8256 (16 f32 smoothing factors, 4096 fp16 codebook entries)");
  std::vector<std::vector<uint8_t>> bad = good;
  const float zero = 0.0f;
  std::memcpy(bad[0].data() + 4 * 3, &zero, 4);
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states(bad, 0); }),
                  "smoothing factor 0 for key channel 3");
  bad = good;
  bad[0][4 * d + 2 * 5] = 0x00, bad[0][4 * d + 2 * 5 + 1] = 0x7c;  // +inf
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states(bad, 0); }), "codebook entry 5 = inf");
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states(good, 1); }), "no tables for KV head 1");
}

// A stream's state is its KV head's tables from the artifact: a stream restored without it (what
// a GPU's download holds) gets the artifact's, and a state that is not the artifact's is refused.
TEST(Vecinfer, RestoredStreamsGetTheArtifactsTablesAndNoOthers) {
  const size_t d = 16, heads = 2, n = 40;
  const Calibrated cal("vecinfer", d, heads);
  const std::vector<float> values(n * heads * d, 0.5f);
  KVCache cache("vecinfer", cal.shape);
  cache.append(TensorView::f32(cal.keys.data(), {n, heads, d}),
               TensorView::f32(values.data(), {n, heads, d}));
  ASSERT_GT(cache.key_streams()[0].encoded, 0u);
  EXPECT_TRUE(cache.states_from_spec());

  std::vector<CacheStream> keys = cache.key_streams();
  for (CacheStream& s : keys) s.state.clear();
  KVCache copy("vecinfer", cal.shape);
  copy.restore(keys, cache.value_streams());
  for (size_t h = 0; h < heads; ++h)
    EXPECT_EQ(copy.key_streams()[h].state, cache.key_streams()[h].state) << h;
  EXPECT_EQ(copy.decode_keys(), cache.decode_keys());
  EXPECT_EQ(copy.bytes(), cache.bytes());

  // Valid tables, but another head's: what a file of another artifact would hold.
  keys = cache.key_streams();
  std::swap(keys[0].state, keys[1].state);
  KVCache other("vecinfer", cal.shape);
  EXPECT_CONTAINS(
      test::error_message<Error>([&] { other.restore(keys, cache.value_streams()); }),
      "KV head 0 holds 8256 bytes of fitted state that are not the 8256 its spec's artifact gives it");
  EXPECT_EQ(other.tokens(), 0u);  // unchanged by the refusal

  // A cache fitted to its tokens keeps its states: a device may not drop them.
  EXPECT_FALSE(KVCache("rabitq", LayerShape{heads, d, 0, 0}).states_from_spec());
}

TEST(Vecinfer, SpecParametersAreChecked) {
  const Calibrated cal("vecinfer", 128);
  test::expect_refused_naming("vecinfer:dims=3", "dims=3 does not divide head_dim 128", cal.shape);
  test::expect_refused_naming("vecinfer:centroids=257", "centroids");
  test::expect_refused_naming("vecinfer:centroids=1", "centroids");
  test::expect_refused_naming("vecinfer:vbits=9", "vbits");
  test::expect_refused_naming("vecinfer:dims=0", "dims");
}

}  // namespace
}  // namespace veloxquant
