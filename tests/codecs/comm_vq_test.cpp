// comm_vq: the properties CommVQ (Li et al., ICML 2025, arXiv 2506.18879) rests on. Its codebooks
// commute with RoPE: rotating a decoded key equals decoding with rotated centroids, and a rotated
// key quantized against rotated codebooks gets the same codes, so keys are stored before RoPE and
// rotated at attend time; EM never raises the distortion and each residual codebook lowers it;
// attention over the cache is attention over the decoded keys rotated to their positions; the
// record is one byte per codebook; missing or mismatched calibration and damaged codes are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "codec_test_helpers.h"
#include "codecs/comm_vq/comm_vq_fit.h"
#include "codecs/comm_vq/comm_vq_key_codec.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "test_data.h"
#include "veloxquant/calibration.h"
#include "veloxquant/rope.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

using comm_vq::Codebooks;

// A layer of `heads` KV heads calibrated on a synthetic draw (outlier channels, a sink), and a
// second draw of the same statistics to evaluate on. The synthetic keys stand for pre-RoPE keys.
struct Calibrated {
  static constexpr size_t kCalibration = 1024, kTokens = 256;
  std::vector<float> keys, values;  // [kTokens, heads, d], not seen by the calibration
  LayerShape shape;
  Calibrated(const std::string& spec, size_t d, size_t heads = 1) : shape{heads, d, 0, 0} {
    const SyntheticKV w = make_synthetic_kv(kCalibration + kTokens, heads, d, 1, 1, 9);
    const size_t row = heads * d;
    keys.assign(w.keys.begin() + kCalibration * row, w.keys.end());
    values.assign(w.values.begin() + kCalibration * row, w.values.end());
    const CalibrationSamples samples{std::span(w.keys).first(kCalibration * row),
                                     std::span(w.values).first(kCalibration * row), kCalibration, heads, d, 0};
    shape.calibration = calibrate_on_samples(parse_spec(spec), samples);
  }
  Codebooks codebooks(size_t books, size_t entries, size_t head = 0) const {
    const std::span<const float> t =
        shape.calibration->layers[0].table(head, "key.codebooks", books * entries * shape.head_dim);
    return {t.begin(), t.end()};
  }
};

RopeParams rope_of(size_t d, RopeLayout layout) { return RopeParams{static_cast<uint32_t>(d), 10000.0f, 1.0f, layout}; }

// Every centroid rotated by R(p).
Codebooks rotated(Codebooks books, size_t d, const RopeParams& rope, int64_t p) {
  apply_rope(rope, books.data(), books.size() / d, d, p);
  return books;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

constexpr const char* kSmall = "comm_vq:codebooks=3,bits=6,iters=4";
constexpr size_t kBooks = 3, kEntries = 64;

// rotate . decode == decode . rotate: R(p) sum_b c_b = sum_b R(p) c_b, for both RoPE layouts
// (pairs (2i, 2i+1) and (i, i + d/2)) and positions far apart.
TEST(CommVq, RotatingADecodedKeyEqualsDecodingWithRotatedCentroids) {
  const size_t d = 64;
  const Calibrated cal(kSmall, d);
  const Codebooks books = cal.codebooks(kBooks, kEntries);
  Rng rng(3);
  for (const RopeLayout layout : {RopeLayout::Interleaved, RopeLayout::Neox}) {
    const RopeParams rope = rope_of(d, layout);
    for (const int64_t p : {1, 37, 1000, 123457}) {
      const Codebooks turned = rotated(books, d, rope, p);
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<uint8_t> codes(kBooks);
        for (uint8_t& c : codes) c = static_cast<uint8_t>(rng.next_u64() % kEntries);
        std::vector<float> a(d), b(d);
        comm_vq::decode_sum(codes.data(), books.data(), kBooks, kEntries, d, a.data());
        apply_rope(rope, a.data(), 1, d, p);
        comm_vq::decode_sum(codes.data(), turned.data(), kBooks, kEntries, d, b.data());
        EXPECT_LT(max_abs_diff(a, b), 1e-4) << "position " << p;
      }
    }
  }
}

// quantize . rotate == rotate . quantize: the greedy residual search over rotated codebooks picks
// for R(p) k the codes it picks for k over the plain ones (R(p) keeps every distance), so one
// codebook trained before RoPE serves every position.
TEST(CommVq, QuantizingARotatedKeyWithRotatedCodebooksPicksTheSameCodes) {
  const size_t d = 64;
  const Calibrated cal(kSmall, d);
  const Codebooks books = cal.codebooks(kBooks, kEntries);
  const std::vector<float> norms = comm_vq::centroid_norms(books, d);
  const RopeParams rope = rope_of(d, RopeLayout::Interleaved);
  size_t same = 0, total = 0;
  for (const int64_t p : {5, 999, 40000}) {
    const Codebooks turned = rotated(books, d, rope, p);
    const std::vector<float> turned_norms = comm_vq::centroid_norms(turned, d);
    for (size_t t = 0; t < Calibrated::kTokens; ++t) {
      std::vector<float> k(cal.keys.begin() + static_cast<std::ptrdiff_t>(t * d),
                           cal.keys.begin() + static_cast<std::ptrdiff_t>((t + 1) * d));
      std::vector<uint8_t> plain(kBooks), turned_codes(kBooks);
      const double e0 = comm_vq::encode_residual(k.data(), books.data(), norms.data(), kBooks, kEntries, d, plain.data());
      apply_rope(rope, k.data(), 1, d, p);
      const double e1 = comm_vq::encode_residual(k.data(), turned.data(), turned_norms.data(), kBooks, kEntries, d,
                                                 turned_codes.data());
      same += plain == turned_codes;
      ++total;
      EXPECT_NEAR(e0, e1, 1e-3 * (e0 + 1e-6));  // the same error: R(p) keeps the residual's norm
    }
  }
  // Float rounding may flip an exact tie between two centroids; nothing else may differ.
  EXPECT_GE(static_cast<double>(same), 0.99 * static_cast<double>(total));
}

// EM never raises the mean squared error (the E-step keeps a key's codes unless greedy search
// finds better ones; each M-step centroid is the least-squares one given the rest), and it ends
// below where residual k-means left it.
TEST(CommVq, EmLowersTheDistortionAtEveryIteration) {
  const size_t d = 32, n = 1500;
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, 21);
  const comm_vq::FittedHead f = comm_vq::fit_head(w.keys.data(), n, d, d, 3, 32, 8, 7);
  ASSERT_EQ(f.distortion.size(), 9u);
  for (size_t i = 1; i < f.distortion.size(); ++i) {
    EXPECT_LE(f.distortion[i], f.distortion[i - 1] * (1 + 1e-6)) << "iteration " << i;
  }
  EXPECT_LT(f.distortion.back(), 0.99 * f.distortion.front());
}

// Each further residual codebook lowers the error of the keys it encodes (by at least 1 %), on
// keys it never saw.
TEST(CommVq, EachResidualCodebookLowersTheDistortion) {
  const size_t d = 64, books = 4, entries = 64;
  const Calibrated cal("comm_vq:codebooks=4,bits=6,iters=3", d);
  const Codebooks b = cal.codebooks(books, entries);
  const std::vector<float> norms = comm_vq::centroid_norms(b, d);
  double previous = test::sq_error(cal.keys, std::vector<float>(cal.keys.size(), 0.0f));
  for (size_t used = 1; used <= books; ++used) {
    double err = 0;
    std::vector<uint8_t> codes(used);
    for (size_t t = 0; t < Calibrated::kTokens; ++t)
      err += comm_vq::encode_residual(cal.keys.data() + t * d, b.data(), norms.data(), used, entries, d, codes.data());
    EXPECT_LT(err, 0.99 * previous) << used << " codebooks";
    previous = err;
  }
}

// The cache stores keys before RoPE and rotates them at attend time: on every attend path,
// attention equals plain attention over the codec's decoded keys rotated to their positions (and
// the decoded values), and decode_keys() hands out those rotated keys.
TEST(CommVq, AttendEqualsAttentionOverDecodedThenRotatedKeys) {
  const size_t d = 64, heads = 2, q_heads = 4, n = Calibrated::kTokens, nq = 3;
  const Calibrated cal(kSmall, d, heads);
  KVCache cache(kSmall, cal.shape);
  const RopeParams rope = rope_of(d, RopeLayout::Interleaved);
  std::vector<int64_t> positions(n);
  for (size_t t = 0; t < n; ++t) positions[t] = static_cast<int64_t>(t);
  // Two appends: the second's positions continue the first's.
  const size_t first = 100, row = heads * d;
  cache.append(TensorView::f32(cal.keys.data(), {first, heads, d}), TensorView::f32(cal.values.data(), {first, heads, d}),
               std::span(positions).first(first), rope);
  cache.append(TensorView::f32(cal.keys.data() + first * row, {n - first, heads, d}),
               TensorView::f32(cal.values.data() + first * row, {n - first, heads, d}),
               std::span(positions).subspan(first), rope);
  // Expected keys: each head's codec decodes its pre-RoPE codes (of the keys as the fp16 tail
  // held them before their block was encoded), then R(t) for token t.
  const LayerCodecs codecs = parse_spec(kSmall).method->make(parse_spec(kSmall).params, cal.shape);
  std::vector<float> expected(n * row);
  for (size_t h = 0; h < heads; ++h) {
    std::vector<float> x(n * d), codes_out(n * d);
    for (size_t t = 0; t < n; ++t)
      for (size_t c = 0; c < d; ++c) x[t * d + c] = f16_to_f32(f32_to_f16(cal.keys[t * row + h * d + c]));
    auto states = codecs.key->fit_streams(x.data(), n, heads);
    const auto codec = codecs.key->with_states(states, h);
    std::vector<uint8_t> codes(codec->code_bytes(n));
    codec->encode(x.data(), n, codes.data());
    codec->decode(codes.data(), n, codes_out.data());
    for (size_t t = 0; t < n; ++t) {
      apply_rope(rope, codes_out.data() + t * d, 1, d, static_cast<int64_t>(t));
      std::copy_n(codes_out.data() + t * d, d, expected.data() + t * row + h * d);
    }
  }
  const std::vector<float> keys = cache.decode_keys();
  EXPECT_LT(max_abs_diff(keys, expected), 1e-4);
  // Queries of the last nq tokens, rotated as the runtime rotates them.
  const SyntheticKV w = make_synthetic_kv(nq, q_heads, d, 1, 1, 5);
  std::vector<float> q(w.keys.begin(), w.keys.begin() + static_cast<std::ptrdiff_t>(nq * q_heads * d));
  for (size_t i = 0; i < nq; ++i) apply_rope(rope, q.data() + i * q_heads * d, q_heads, d, static_cast<int64_t>(n - nq + i));
  const std::vector<float> values = cache.decode_values();
  const std::vector<float> truth = exact_attention(q.data(), nq, q_heads, expected.data(), values.data(), n, heads, d);
  for (const AttendPath path : {AttendPath::Fused, AttendPath::Decoded, AttendPath::Reference}) {
    std::vector<float> out(nq * q_heads * d);
    cache.attend(TensorView::f32(q.data(), {nq, q_heads, d}), out.data(), path);
    EXPECT_LT(max_abs_diff(out, truth), 1e-4) << "path " << static_cast<int>(path);
  }
  // The rotation matters: attention over the same keys left before RoPE is another answer.
  std::vector<float> pre(n * row);
  for (size_t t = 0; t < n; ++t)
    for (size_t h = 0; h < heads; ++h) {
      std::copy_n(expected.data() + t * row + h * d, d, pre.data() + t * row + h * d);
      apply_rope(rope, pre.data() + t * row + h * d, 1, d, -static_cast<int64_t>(t));
    }
  EXPECT_GT(max_abs_diff(exact_attention(q.data(), nq, q_heads, pre.data(), values.data(), n, heads, d), truth), 1e-3);
}

// Under an eviction policy each kept token is rotated to the position it was appended at, not to
// its place in the shortened cache.
TEST(CommVq, EvictedCachesRotateEachKeptTokenToItsOwnPosition) {
  const size_t d = 32, n = 200, nq = 4;
  const Calibrated cal(kSmall, d);
  const std::string spec = std::string("h2o:budget=64+") + kSmall;
  KVCache cache(spec, cal.shape);
  const RopeParams rope = rope_of(d, RopeLayout::Interleaved);
  std::vector<int64_t> positions(n);
  for (size_t t = 0; t < n; ++t) positions[t] = 1000 + static_cast<int64_t>(t);  // a policy takes any positions
  cache.append(TensorView::f32(cal.keys.data(), {n, 1, d}), TensorView::f32(cal.values.data(), {n, 1, d}), positions, rope);
  std::vector<float> q(cal.keys.end() - static_cast<std::ptrdiff_t>(nq * d), cal.keys.end()), out(nq * d);
  cache.attend_observed(TensorView::f32(q.data(), {nq, 1, d}), out.data());
  cache.evict();
  const std::vector<int64_t> kept = cache.positions(0);
  ASSERT_EQ(kept.size(), 64u);
  ASSERT_GT(kept.back() - kept.front(), 64);  // tokens were dropped from between the kept ones
  const LayerCodecs codecs = parse_spec(kSmall).method->make(parse_spec(kSmall).params, cal.shape);
  const auto codec = codecs.key->with_states(codecs.key->fit_streams(cal.keys.data(), 1, 1), 0);
  const std::vector<float> keys = cache.decode_keys();
  double worst = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    const auto t = static_cast<size_t>(kept[i] - 1000);
    std::vector<float> x(d), y(d);
    for (size_t c = 0; c < d; ++c) x[c] = f16_to_f32(f32_to_f16(cal.keys[t * d + c]));
    std::vector<uint8_t> codes(codec->code_bytes(1));
    codec->encode(x.data(), 1, codes.data());
    codec->decode(codes.data(), 1, y.data());
    apply_rope(rope, y.data(), 1, d, kept[i]);
    for (size_t c = 0; c < d; ++c) worst = std::max(worst, std::fabs(static_cast<double>(y[c]) - keys[i * d + c]));
  }
  EXPECT_LT(worst, 1e-4);
}

// Without a policy token i sits at position i: positions that do not count on are refused.
TEST(CommVq, PositionsThatSkipAreRefused) {
  const size_t d = 32;
  const Calibrated cal(kSmall, d);
  KVCache cache(kSmall, cal.shape);
  const std::vector<int64_t> positions = {7, 8};
  EXPECT_CONTAINS(test::error_message<ShapeError>([&] {
                    cache.append(TensorView::f32(cal.keys.data(), {2, 1, d}), TensorView::f32(cal.values.data(), {2, 1, d}),
                                 positions, rope_of(d, RopeLayout::Interleaved));
                  }),
                  "token 0 of the append has position 7");
}

// A cache file holds no RoPE: a cache whose keys wait for the model's RoPE is refused, one
// appended without RoPE (keys stored and read as given) is saved.
TEST(CommVq, CacheFilesRefuseKeysThatNeedTheModelsRope) {
  const size_t d = 32, n = 8;
  const Calibrated cal(kSmall, d);
  const std::string path = ::testing::TempDir() + "comm_vq_cache.vqc";
  std::vector<int64_t> positions(n);
  for (size_t t = 0; t < n; ++t) positions[t] = static_cast<int64_t>(t);
  KVCache rotated(kSmall, cal.shape);
  rotated.append(TensorView::f32(cal.keys.data(), {n, 1, d}), TensorView::f32(cal.values.data(), {n, 1, d}),
                 positions, rope_of(d, RopeLayout::Interleaved));
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_caches(std::span(&rotated, 1), path); }),
                  "holds keys before RoPE");
  KVCache plain(kSmall, cal.shape);
  plain.append(TensorView::f32(cal.keys.data(), {n, 1, d}), TensorView::f32(cal.values.data(), {n, 1, d}));
  EXPECT_NO_THROW(save_caches(std::span(&plain, 1), path));
  std::remove(path.c_str());
}

TEST(CommVq, ATokenStoresOneIndexBytePerCodebookPlusItsValue) {
  const size_t d = 128, heads = 2, n = 100;
  const std::string spec = "comm_vq:codebooks=4,bits=5,iters=1,vbits=3";
  const Calibrated cal(spec, d, heads);
  const LayerCodecs c = parse_spec(spec).method->make(parse_spec(spec).params, cal.shape);
  EXPECT_EQ(c.key->code_bytes(n), n * 4);
  EXPECT_EQ(c.value->code_bytes(n), n * (4 + 48));  // f32 norm + 128 3-bit codes
  // Per layer: every head's 4 codebooks of 32 fp16 centroids of 128; per stream: its head index.
  EXPECT_EQ(c.key->state_bytes(), heads * 4 * 32 * 128 * 2);
  EXPECT_EQ(c.key->stream_state_bytes(), 4u);
  KVCache cache(spec, cal.shape);
  cache.append(TensorView::f32(cal.keys.data(), {n, heads, d}), TensorView::f32(cal.values.data(), {n, heads, d}));
  EXPECT_EQ(cache.key_bytes(), heads * (n * 4 + 4) + c.key->state_bytes());
  EXPECT_EQ(cache.value_bytes(), heads * n * 52 + c.value->state_bytes());
}

TEST(CommVq, MissingOrMismatchedCalibrationIsRefused) {
  const std::string missing = test::error_message<Error>([] { KVCache cache("comm_vq", LayerShape{1, 128, 0, 0}); });
  EXPECT_CONTAINS(missing, "needs calibration");
  EXPECT_CONTAINS(missing, "veloxquant calibrate");
  EXPECT_CONTAINS(missing, "--kv comm_vq:");
  const Calibrated cal(kSmall, 32);
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache cache("comm_vq:codebooks=2,bits=6,iters=4", cal.shape); }),
                  "artifact 'comm_vq:codebooks=3,bits=6,iters=4");
  LayerShape other_dim = cal.shape;
  other_dim.head_dim = 64;
  EXPECT_CONTAINS(test::error_message<Error>([&] { KVCache cache(kSmall, other_dim); }),
                  "head_dim: artifact 32, cache 64");
}

TEST(CommVq, DamagedCodebooksAreRefused) {
  const Calibrated cal(kSmall, 16);
  auto damaged = [&](size_t at, float v) {
    auto a = std::make_shared<CalibrationArtifact>(*cal.shape.calibration);
    a->layers[0].heads[0]["key.codebooks"][at] = v;
    LayerShape s = cal.shape;
    s.calibration = a;
    return test::error_message<FormatError>([&] { KVCache cache(kSmall, s); });
  };
  EXPECT_CONTAINS(damaged(7, 0.1f), "codebook value 7 of KV head 0 is 0.1; expected a finite fp16 value");
  EXPECT_CONTAINS(damaged(9, INFINITY), "codebook value 9 of KV head 0 is inf");
}

TEST(CommVq, CorruptCodesAndStatesAreRefused) {
  const size_t d = 32, n = 4;
  const Calibrated cal(kSmall, d);
  const LayerCodecs c = parse_spec(kSmall).method->make(parse_spec(kSmall).params, cal.shape);
  const auto codec = codec_for_stream(*c.key, cal.keys.data(), n);
  std::vector<uint8_t> codes(codec->code_bytes(n));
  codec->encode(cal.keys.data(), n, codes.data());
  EXPECT_NO_THROW(codec->check_codes(codes.data(), n));
  codes[2 * kBooks + 1] = 64;
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec->check_codes(codes.data(), n); }),
                  "token 2 has index 64 in codebook 1; expected < 64 entries");
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states({{1, 2}}, 0); }),
                  "is not that head's index (2 bytes");
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)c.key->with_states({{0, 0, 0, 0}, {0, 0, 0, 0}}, 1); }),
                  "no codebooks for KV head 1");
  EXPECT_CONTAINS(test::error_message<Error>([&] { test::round_trip(*c.key, cal.keys, 1); }), "prototype");
}

TEST(CommVq, SpecParametersAreChecked) {
  test::expect_refused_naming("comm_vq:codebooks=0", "codebooks");
  test::expect_refused_naming("comm_vq:bits=9", "bits");
  test::expect_refused_naming("comm_vq:iters=101", "iters");
  test::expect_refused_naming("comm_vq:vbits=9", "vbits");
}

}  // namespace
}  // namespace veloxquant
