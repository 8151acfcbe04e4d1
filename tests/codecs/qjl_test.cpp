// QJL keys: the paper's properties (unbiased inner-product estimate, variance of Lemma 3.5), the
// fused score against the decode-based reference, exact byte accounting and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "codecs/qjl/qjl_key_codec.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"
#include "test_data.h"

namespace veloxquant {
namespace {

using test::gaussian;

double norm2(const std::vector<float>& v) { return test::dot(v.data(), v.data(), v.size()); }

// The estimate of q . k from one independently drawn sketch per seed.
std::vector<double> estimates(const QjlKeyConfig& base, const std::vector<float>& q,
                              const std::vector<float>& keys, size_t tokens, size_t token, int trials) {
  std::vector<double> est;
  for (int s = 0; s < trials; ++s) {
    QjlKeyConfig cfg = base;
    cfg.seed = derive_seed(1234, {static_cast<uint64_t>(s)});
    const QjlKeyCodec codec(cfg);
    std::vector<uint8_t> codes(codec.code_bytes(tokens));
    codec.encode(keys.data(), tokens, codes.data());
    std::vector<float> scores(tokens);
    codec.score(q.data(), 1, codes.data(), tokens, scores.data());
    est.push_back(scores[token]);
  }
  return est;
}

void mean_and_variance(const std::vector<double>& v, double& mean, double& var) {
  mean = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= double(v.size() - 1);
}

TEST(QjlKeys, InnerProductEstimateIsUnbiasedWithPaperVariance) {
  const size_t d = 128, m = 64;
  const int trials = 3000;
  const std::vector<float> q = gaussian(d, 1), k0 = gaussian(d, 2);
  // k correlated with q so that q . k is far from 0 and a bias would show.
  std::vector<float> k(d);
  for (size_t c = 0; c < d; ++c) k[c] = 0.6f * q[c] + 0.8f * k0[c];
  QjlKeyConfig cfg;
  cfg.dim = d;
  cfg.proj = m;
  cfg.outliers = 0;
  const std::vector<double> est = estimates(cfg, q, k, 1, 0, trials);
  double mean, var;
  mean_and_variance(est, mean, var);
  const double qk = test::dot(q.data(), k.data(), d), qq = norm2(q), kk = norm2(k);
  // Each of the m rows contributes sqrt(pi/2) ||k|| <s, q> sign(<s, k>), whose second moment is
  // (pi/2) ||q||^2 ||k||^2: the exact variance of the mean of m rows, within Lemma 3.5's bound.
  const double exact_var = (std::numbers::pi / 2 * qq * kk - qk * qk) / double(m);
  const double lemma_bound = std::numbers::pi / (2.0 * double(m)) * qq * kk;
  ASSERT_LT(exact_var, lemma_bound);
  const double se = std::sqrt(exact_var / trials);
  EXPECT_LT(std::abs(mean - qk), 4 * se) << "mean " << mean << " vs q.k " << qk;
  EXPECT_NEAR(var / exact_var, 1.0, 0.12) << "variance " << var << " vs " << exact_var;
  EXPECT_LT(var, lemma_bound);
}

TEST(QjlKeys, OutlierSplitStaysUnbiased) {
  const size_t d = 64, m = 64, tokens = 4;
  const int trials = 3000;
  std::vector<float> keys = gaussian(tokens * d, 3);
  for (size_t t = 0; t < tokens; ++t) keys[t * d + 5] += 12.0f, keys[t * d + 40] -= 9.0f;
  std::vector<float> q = gaussian(d, 4);
  q[5] += 1.0f;
  QjlKeyConfig cfg;
  cfg.dim = d;
  cfg.proj = m;
  cfg.outliers = 2;
  cfg.outlier_proj = 32;
  cfg.group = tokens;
  const std::vector<double> est = estimates(cfg, q, keys, tokens, 2, trials);
  double mean, var;
  mean_and_variance(est, mean, var);
  const float* k = keys.data() + 2 * d;
  const double qk = test::dot(q.data(), k, d);
  // The inlier and outlier sketches are each unbiased, with variances from their own norms.
  double qi = 0, ki = 0, qo = 0, ko = 0, qki = 0, qko = 0;
  for (size_t c = 0; c < d; ++c) {
    const bool out = c == 5 || c == 40;
    (out ? qo : qi) += double(q[c]) * q[c];
    (out ? ko : ki) += double(k[c]) * k[c];
    (out ? qko : qki) += double(q[c]) * k[c];
  }
  const double var_in = (std::numbers::pi / 2 * qi * ki - qki * qki) / double(m);
  const double var_out = (std::numbers::pi / 2 * qo * ko - qko * qko) / 32.0;
  // The two sketches share rows of S, so their errors correlate; bound the variance by the
  // Cauchy-Schwarz worst case.
  const double var_max = std::pow(std::sqrt(var_in) + std::sqrt(var_out), 2);
  EXPECT_LT(std::abs(mean - qk), 4 * std::sqrt(var_max / trials)) << mean << " vs " << qk;
  EXPECT_LT(var, 1.15 * var_max);
}

TEST(QjlKeys, OutlierSplitReducesScoreErrorOnOutlierChannels) {
  const size_t d = 128, tokens = 64, nq = 16;
  std::vector<float> keys = gaussian(tokens * d, 5);
  for (size_t t = 0; t < tokens; ++t)
    for (size_t c : {3, 17, 60, 99}) keys[t * d + c] = 15.0f + keys[t * d + c];
  const std::vector<float> q = gaussian(nq * d, 6);
  auto score_mse = [&](size_t outliers) {
    QjlKeyConfig cfg;
    cfg.dim = d;
    cfg.outliers = outliers;
    cfg.seed = 9;
    const QjlKeyCodec codec(cfg);
    std::vector<uint8_t> codes(codec.code_bytes(tokens));
    codec.encode(keys.data(), tokens, codes.data());
    std::vector<float> s(nq * tokens);
    codec.score(q.data(), nq, codes.data(), tokens, s.data());
    double err = 0;
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < tokens; ++t) {
        const double e = s[i * tokens + t] - test::dot(q.data() + i * d, keys.data() + t * d, d);
        err += e * e;
      }
    return err / double(nq * tokens);
  };
  EXPECT_LT(score_mse(8), 0.5 * score_mse(0));
}

class QjlCodecShapes : public ::testing::TestWithParam<std::tuple<size_t, size_t, size_t>> {};

TEST_P(QjlCodecShapes, FusedScoreMatchesDecodedKeys) {
  const auto [d, proj, outliers] = GetParam();
  QjlKeyConfig cfg;
  cfg.dim = d;
  cfg.proj = proj;
  cfg.outliers = outliers;
  cfg.outlier_proj = proj / 16 * 8;  // about half, whole bytes
  cfg.group = 16;
  cfg.seed = 77;
  const QjlKeyCodec codec(cfg);
  const size_t n = 3 * codec.block_tokens();
  const std::vector<float> keys = gaussian(n * d, 10, 2.0f);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(keys.data(), n, codes.data());
  std::vector<float> decoded(n * d);
  codec.decode(codes.data(), n, decoded.data());
  // The masked sums are compiled per query count (1 to 4 at a time, sign_sums.cpp): decode
  // steps score one or two queries per KV head, prefill chunks more.
  for (const size_t nq : {1, 2, 7}) {
    const std::vector<float> q = gaussian(nq * d, 11);
    std::vector<float> fused(nq * n), reference(nq * n);
    codec.score(q.data(), nq, codes.data(), n, fused.data());
    codec.Codec::score(q.data(), nq, codes.data(), n, reference.data());
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < n; ++t) {
        // Relative to the scale of the score: |q| |k_hat|.
        const double scale = std::sqrt(test::dot(q.data() + i * d, q.data() + i * d, d) *
                                       test::dot(decoded.data() + t * d, decoded.data() + t * d, d));
        EXPECT_NEAR(fused[i * n + t], reference[i * n + t], 1e-4 * scale) << nq << ": " << i << "," << t;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, QjlCodecShapes,
                         ::testing::Values(std::make_tuple(128, 256, 8), std::make_tuple(128, 256, 0),
                                           std::make_tuple(64, 72, 3), std::make_tuple(96, 40, 0),
                                           std::make_tuple(300, 128, 4)));

// Long streams: the fused score runs in spans of tokens (256 without outliers) and in groups of
// four records per pass; neither boundary may change a score.
TEST(QjlKeys, FusedScoreMatchesOnLongStreams) {
  for (const size_t outliers : {size_t{0}, size_t{8}}) {
    QjlKeyConfig cfg;  // d = 128, m = 256
    cfg.outliers = outliers;
    cfg.seed = 5;
    const QjlKeyCodec codec(cfg);
    const size_t d = cfg.dim, n = 19 * 32 + (outliers ? 0 : 3), nq = 5;
    const std::vector<float> keys = gaussian(n * d, 12), q = gaussian(nq * d, 13);
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(keys.data(), n, codes.data());
    std::vector<float> fused(nq * n), reference(nq * n);
    codec.score(q.data(), nq, codes.data(), n, fused.data());
    codec.Codec::score(q.data(), nq, codes.data(), n, reference.data());
    // Relative to the scale of the scores: |q| |k| is about d for unit-variance entries.
    for (size_t i = 0; i < nq * n; ++i)
      EXPECT_NEAR(fused[i], reference[i], 1e-4 * double(d)) << outliers << "," << i;
  }
}

TEST(QjlKeys, ByteLayoutIsExactAndAdditive) {
  QjlKeyConfig cfg;  // d = 128, m = 256, 8 outliers with 128 bits, groups of 32
  const QjlKeyCodec codec(cfg);
  // Per group: 8 channel indices, then 32 tokens of 32 + 16 bytes of signs and two fp16 norms.
  EXPECT_EQ(codec.code_bytes(32), 8u + 32u * (32 + 16 + 4));
  EXPECT_EQ(codec.state_bytes(), 128u * 256u * 4u);
  cfg.outliers = 0;
  const QjlKeyCodec plain(cfg);
  EXPECT_EQ(plain.block_tokens(), 1u);
  EXPECT_EQ(plain.code_bytes(1), 32u + 2u);
  for (const QjlKeyCodec* c : {&codec, &plain}) {
    const size_t b = c->block_tokens(), n = 4 * b;
    EXPECT_EQ(c->code_bytes(n), c->code_bytes(b) + c->code_bytes(n - b));
    const std::vector<float> keys = gaussian(n * 128, 12);
    std::vector<uint8_t> whole(c->code_bytes(n)), parts(c->code_bytes(n));
    c->encode(keys.data(), n, whole.data());
    c->encode(keys.data(), b, parts.data());
    c->encode(keys.data() + b * 128, n - b, parts.data() + c->code_bytes(b));
    EXPECT_EQ(whole, parts);
  }
}

// The inlier sign bits are those of S k summed channel by channel in order with one fused
// multiply-add each (outlier channels skipped), as the GPU append computes them: the blocked
// encode must not reorder a sum, or a sign near 0 would differ between the devices. Without
// outliers the keys are made orthogonal to the first rows of S, so that those sums are rounding
// noise whose sign any other order would change about half the time.
TEST(QjlKeys, InlierSignsAreChannelOrderSums) {
  for (size_t outliers : {0, 8}) {
    QjlKeyConfig cfg;  // d = 128, m = 256, outlier sketches of 128 bits, groups of 32
    cfg.outliers = outliers;
    const QjlKeyCodec codec(cfg);
    const size_t d = cfg.dim, m = cfg.proj, n = 64, b = codec.block_tokens(), noise_rows = 8;
    const size_t token_bytes = m / 8 + (outliers ? cfg.outlier_proj / 8 + 4 : 2);
    const std::vector<float> s = QjlKeyCodec::sketch_matrix(d, m, cfg.seed);
    std::vector<float> keys = gaussian(n * d, 14);
    for (size_t t = 0; t < n && outliers == 0; ++t) {
      std::vector<double> k(keys.begin() + t * d, keys.begin() + (t + 1) * d);
      for (int pass = 0; pass < 2; ++pass)  // Gram-Schmidt against S's rows, twice for accuracy
        for (size_t i = 0; i < noise_rows; ++i) {
          double ks = 0, ss = 0;
          for (size_t c = 0; c < d; ++c) ks += k[c] * s[i * d + c], ss += double(s[i * d + c]) * s[i * d + c];
          for (size_t c = 0; c < d; ++c) k[c] -= ks / ss * s[i * d + c];
        }
      for (size_t c = 0; c < d; ++c) keys[t * d + c] = static_cast<float>(k[c]);
    }
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(keys.data(), n, codes.data());
    for (size_t t = 0; t < n; ++t) {
      const uint8_t* block = codes.data() + (t / b) * codec.code_bytes(b);
      std::vector<bool> inlier(d, true);
      for (size_t j = 0; j < outliers; ++j) inlier[block[j]] = false;
      const uint8_t* signs = block + outliers + (t % b) * token_bytes;
      for (size_t i = 0; i < m; ++i) {
        float sum = 0;
        for (size_t c = 0; c < d; ++c)
          if (inlier[c]) sum = std::fma(keys[t * d + c], s[i * d + c], sum);
        ASSERT_EQ((signs[i / 8] >> (i % 8)) & 1, sum > 0 ? 1 : 0)
            << outliers << " outliers, token " << t << ", row " << i << ": sum " << sum;
      }
    }
  }
}

TEST(QjlKeys, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::vector<float> keys = gaussian(64 * 128, 13);
  auto encode = [&](uint64_t seed) {
    QjlKeyConfig cfg;
    cfg.seed = seed;
    const QjlKeyCodec codec(cfg);
    std::vector<uint8_t> codes(codec.code_bytes(64));
    codec.encode(keys.data(), 64, codes.data());
    return codes;
  };
  EXPECT_EQ(encode(5), encode(5));
  EXPECT_NE(encode(5), encode(6));
}

TEST(QjlMethod, RejectsParametersItCannotHonour) {
  const LayerShape shape;
  EXPECT_THROW(KVCache("qjl:proj=100", shape), SpecError);
  EXPECT_THROW(KVCache("qjl:proj=64,outlier_proj=128", shape), SpecError);
  EXPECT_THROW(KVCache("qjl:proj=5000", shape), SpecError);
  EXPECT_THROW(KVCache("qjl:vgroup=24", shape), SpecError);
  // Whether a spec is valid does not depend on the head_dim that caps the sketches.
  EXPECT_THROW(KVCache("qjl:proj=100", LayerShape{1, 8, 0, 0}), SpecError);
  EXPECT_THROW(KVCache("qjl:proj=64,outlier_proj=128", LayerShape{1, 8, 0, 0}), SpecError);
  try {
    const KVCache cache("qjl:proj=64,outlier_proj=128", shape);
    ADD_FAILURE() << "outlier_proj > proj was accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("outlier_proj=128"), std::string::npos) << e.what();
  }
}

// Small and odd head sizes take the default spec: at most head_dim/16 outlier channels, sketches
// of at most 8 (outliers: 4) bits per channel, value groups of min(vgroup, head_dim) channels (the
// last one shorter where vgroup does not divide it). Keys stay smaller than in fp16.
TEST(QjlMethod, DefaultSpecRunsAtEveryCommonHeadDim) {
  for (size_t d : {2, 4, 6, 8, 40, 64, 80, 96, 128, 256}) {
    const Spec spec = parse_spec("qjl");
    const LayerCodecs c = spec.method->make(spec.params, LayerShape{1, d, 0, 0});
    const size_t outliers = std::min<size_t>(8, d / 16);
    const size_t proj = std::min<size_t>(256, 8 * d);
    const size_t outlier_proj = std::min<size_t>(128, std::max<size_t>(8, 4 * d / 8 * 8));
    // Per group of 32 tokens: the outlier channel indices; per token: the two sketches and two
    // norms (with outliers) or one sketch and one norm (head_dim < 16: no outliers).
    const size_t per_token = outliers ? proj / 8 + outlier_proj / 8 + 4 : proj / 8 + 2;
    EXPECT_EQ(c.key->block_tokens(), outliers ? 32u : 1u) << d;
    EXPECT_EQ(c.key->code_bytes(32), (outliers ? outliers : 0) + 32 * per_token) << d;
    if (d > 2) {
      EXPECT_LT(per_token, 2 * d) << d;  // head_dim 2: 16 sign bits and a norm, as in fp16
    }
    const SyntheticKV w = make_synthetic_kv(300, 2, d, 2, 2, d);
    for (const char* text : {"qjl", "qjl:residual=0"}) {
      KVCache cache(text, LayerShape{2, d, 0, 1});
      cache.append(TensorView::f32(w.keys.data(), {300, 2, d}), TensorView::f32(w.values.data(), {300, 2, d}));
      std::vector<float> fused(2 * w.q_heads * d), ref(fused.size());
      const TensorView q = TensorView::f32(w.queries.data(), {2, w.q_heads, d});
      cache.attend(q, fused.data(), AttendPath::Fused);
      cache.attend(q, ref.data(), AttendPath::Reference);
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_TRUE(std::isfinite(fused[i])) << text << ", head_dim " << d;
        ASSERT_NEAR(fused[i], ref[i], 1e-3 * (1 + std::fabs(ref[i]))) << text << ", head_dim " << d;
      }
    }
  }
  // head_dim 128 keeps the paper's 8 outlier channels.
  const Spec spec = parse_spec("qjl");
  EXPECT_EQ(spec.method->make(spec.params, LayerShape{1, 128, 0, 0}).key->code_bytes(32), 8u + 32u * 52u);
}

// Every element fits fp16, the norm (1e4 * sqrt(128)) does not: it is stored as an RMS and kept.
TEST(QjlMethod, KeyNormBeyondHalfRangeIsKept) {
  QjlKeyConfig cfg;
  cfg.outliers = 0;
  const QjlKeyCodec codec(cfg);
  std::vector<float> key(128, 1e4f), q(128, 1.0f);
  std::vector<uint8_t> codes(codec.code_bytes(1));
  codec.encode(key.data(), 1, codes.data());
  float score = 0;
  codec.score(q.data(), 1, codes.data(), 1, &score);
  ASSERT_TRUE(std::isfinite(score));
  EXPECT_NEAR(score, 128 * 1e4f, 0.3f * 128 * 1e4f);  // one sketch: within a few standard deviations
}

}  // namespace
}  // namespace veloxquant
