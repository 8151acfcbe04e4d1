#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"
#include "test_data.h"

namespace veloxquant {
namespace {

using test::gaussian;

float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// Straightforward double-precision causal grouped-query attention.
// k, v: [tokens, kv_heads, d]; q: [nq, q_heads, d]; query i sees tokens [0, tokens - nq + i].
std::vector<double> oracle(const std::vector<float>& q, size_t nq, size_t qh, const std::vector<float>& k,
                           const std::vector<float>& v, size_t tokens, size_t kvh, size_t d) {
  const size_t group = qh / kvh;
  std::vector<double> out(nq * qh * d, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t i = 0; i < nq; ++i)
    for (size_t h = 0; h < qh; ++h) {
      const size_t kh = h / group;
      const size_t visible = tokens - nq + i + 1;
      std::vector<double> s(visible);
      double mx = -std::numeric_limits<double>::infinity();
      for (size_t t = 0; t < visible; ++t) {
        double dot = 0;
        for (size_t c = 0; c < d; ++c)
          dot += static_cast<double>(q[(i * qh + h) * d + c]) * k[(t * kvh + kh) * d + c];
        s[t] = dot * scale;
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (size_t t = 0; t < visible; ++t)
        for (size_t c = 0; c < d; ++c)
          out[(i * qh + h) * d + c] += s[t] / sum * v[(t * kvh + kh) * d + c];
    }
  return out;
}

// Largest over (query, head) rows of ||out - ref|| / ||ref||.
double max_row_rel_err(const std::vector<float>& out, const std::vector<double>& ref, size_t d) {
  double worst = 0;
  for (size_t r = 0; r * d < ref.size(); ++r) {
    double e = 0, n = 0;
    for (size_t c = 0; c < d; ++c) {
      const double diff = out[r * d + c] - ref[r * d + c];
      e += diff * diff;
      n += ref[r * d + c] * ref[r * d + c];
    }
    worst = std::max(worst, std::sqrt(e / std::max(n, 1e-30)));
  }
  return worst;
}

LayerShape shape(size_t heads, size_t dim, uint64_t seed = 0) { return LayerShape{heads, dim, 0, seed}; }

TensorView kv_view(const std::vector<float>& x, size_t tokens, size_t heads, size_t dim) {
  return TensorView::f32(x.data(), {tokens, heads, dim});
}

// -------- append errors --------

class Fp16CacheErrors : public ::testing::Test {
 protected:
  static constexpr size_t H = 2, D = 8;
  KVCache cache{"fp16", shape(H, D)};
  std::vector<float> good = gaussian(4 * H * D, 1);

  void SetUp() override { cache.append(kv_view(good, 4, H, D), kv_view(good, 4, H, D)); }
  void expect_unchanged() {
    EXPECT_EQ(cache.tokens(), 4u);
    EXPECT_EQ(cache.bytes(), 2u * 2u * 4u * H * D);
  }
};

TEST_F(Fp16CacheErrors, AppendWrongRank) {
  const auto ok = kv_view(good, 4, H, D);
  EXPECT_THROW(cache.append(TensorView::f32(good.data(), {4, H * D}), ok), ShapeError);
  EXPECT_THROW(cache.append(ok, TensorView::f32(good.data(), {4, H * D})), ShapeError);
  EXPECT_THROW(cache.append(TensorView::f32(good.data(), {1, 4, H, D}), ok), ShapeError);
  EXPECT_THROW(cache.append(TensorView::f32(good.data(), {4 * H * D}), ok), ShapeError);
  expect_unchanged();
}

TEST_F(Fp16CacheErrors, AppendWrongHeadsOrDim) {
  const auto ok = kv_view(good, 4, H, D);
  EXPECT_THROW(cache.append(TensorView::f32(good.data(), {8, 1, D}), ok), ShapeError);
  EXPECT_THROW(cache.append(ok, TensorView::f32(good.data(), {2, 4, D})), ShapeError);
  EXPECT_THROW(cache.append(TensorView::f32(good.data(), {8, H, D / 2}), ok), ShapeError);
  EXPECT_THROW(cache.append(ok, TensorView::f32(good.data(), {2, H, 2 * D})), ShapeError);
  try {
    cache.append(TensorView::f32(good.data(), {8, 1, D}), ok);
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[8, 1, 8]"), std::string::npos) << msg;       // the bad shape
    EXPECT_NE(msg.find("[tokens, 2, 8]"), std::string::npos) << msg;  // what was expected
  }
  expect_unchanged();
}

TEST_F(Fp16CacheErrors, AppendTokenCountMismatchAndEmpty) {
  EXPECT_THROW(cache.append(kv_view(good, 4, H, D), kv_view(good, 3, H, D)), ShapeError);
  EXPECT_THROW(cache.append(kv_view(good, 1, H, D), kv_view(good, 2, H, D)), ShapeError);
  EXPECT_THROW(cache.append(kv_view(good, 0, H, D), kv_view(good, 0, H, D)), ShapeError);
  EXPECT_THROW(cache.append(kv_view(good, 0, H, D), kv_view(good, 1, H, D)), ShapeError);
  expect_unchanged();
}

TEST_F(Fp16CacheErrors, AppendNonFinite) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto x = good;
    x[5] = bad;
    EXPECT_THROW(cache.append(kv_view(x, 4, H, D), kv_view(good, 4, H, D)), ShapeError);
    EXPECT_THROW(cache.append(kv_view(good, 4, H, D), kv_view(x, 4, H, D)), ShapeError);
  }
  std::vector<uint16_t> h(4 * H * D, 0x3c00);
  h[3] = 0x7e00;  // f16 NaN
  EXPECT_THROW(cache.append(TensorView::f16(h.data(), {4, H, D}), kv_view(good, 4, H, D)), ShapeError);
  h[3] = 0x7c00;  // f16 +inf
  EXPECT_THROW(cache.append(kv_view(good, 4, H, D), TensorView::f16(h.data(), {4, H, D})), ShapeError);
  expect_unchanged();
}

TEST_F(Fp16CacheErrors, AppendOutsideFp16RangeRejected) {
  // Finite f32 values fp16 cannot hold would silently become infinity in the fp16 window.
  for (float bad : {70000.0f, -1e6f, 3e38f}) {
    auto x = good;
    x[9] = bad;
    EXPECT_THROW(cache.append(kv_view(x, 4, H, D), kv_view(good, 4, H, D)), ShapeError) << bad;
    EXPECT_THROW(cache.append(kv_view(good, 4, H, D), kv_view(x, 4, H, D)), ShapeError) << bad;
  }
  std::vector<uint16_t> b(4 * H * D, 0x3f80);  // bf16 1.0
  b[2] = f32_to_bf16(1e20f);
  EXPECT_THROW(cache.append(TensorView::of(b.data(), DType::BF16, {4, H, D}), kv_view(good, 4, H, D)),
               ShapeError);
  expect_unchanged();
  // The largest half is accepted and stored exactly.
  auto top = good;
  top[0] = 65504.0f;
  top[1] = -65504.0f;
  cache.append(kv_view(top, 4, H, D), kv_view(top, 4, H, D));
  const auto dk = cache.decode_keys();
  EXPECT_EQ(dk[4 * H * D + 0], 65504.0f);
  EXPECT_EQ(dk[4 * H * D + 1], -65504.0f);
}

TEST_F(Fp16CacheErrors, AttendQueryShapeErrors) {
  std::vector<float> q = gaussian(8 * 6 * D, 2), out(8 * 6 * D);
  // q_heads not a multiple of kv_heads (2).
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 3, D}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 1, D}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 0, D}), out.data()), ShapeError);
  // Wrong head_dim, wrong rank.
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 2, D + 1}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {2, D}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 1, 2, D}), out.data()), ShapeError);
  // nq > tokens (4), nq = 0.
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {5, 2, D}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {0, 2, D}), out.data()), ShapeError);
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {5, 4, D}), out.data(), AttendPath::Reference),
               ShapeError);
  // Non-finite query.
  q[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(cache.attend(TensorView::f32(q.data(), {1, 2, D}), out.data()), ShapeError);
  // Valid shapes still work: nq == tokens, q_heads = 3 * kv_heads.
  q[1] = 0;
  EXPECT_NO_THROW(cache.attend(TensorView::f32(q.data(), {4, 6, D}), out.data()));
  EXPECT_NO_THROW(cache.attend(TensorView::f32(q.data(), {1, 2, D}), out.data()));
}

TEST(KVCache, AttendOnEmptyCacheThrows) {
  const KVCache cache("fp16", shape(1, 4));
  const float q[4] = {1, 2, 3, 4};
  float out[4];
  EXPECT_THROW(cache.attend(TensorView::f32(q, {1, 1, 4}), out), ShapeError);
}

TEST(KVCache, BadLayerShapeOrSpec) {
  EXPECT_THROW(KVCache("fp16", shape(0, 8)), ShapeError);
  EXPECT_THROW(KVCache("fp16", shape(1, 0)), ShapeError);
  EXPECT_THROW(KVCache("nope", shape(1, 8)), SpecError);
  EXPECT_THROW(KVCache(Spec{}, shape(1, 8)), SpecError);
}

// -------- accounting --------

TEST(KVCache, Fp16BytesAreExact) {
  const size_t H = 3, D = 20;
  KVCache cache("fp16", shape(H, D));
  EXPECT_EQ(cache.tokens(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.fp16_bytes(), 0u);
  size_t tokens = 0;
  for (size_t n : {1u, 7u, 32u, 2u}) {
    const auto x = gaussian(n * H * D, n);
    cache.append(kv_view(x, n, H, D), kv_view(x, n, H, D));
    tokens += n;
    EXPECT_EQ(cache.tokens(), tokens);
    EXPECT_EQ(cache.key_bytes(), 2u * tokens * H * D);
    EXPECT_EQ(cache.value_bytes(), 2u * tokens * H * D);
    EXPECT_EQ(cache.bytes(), 2u * 2u * tokens * H * D);
    EXPECT_EQ(cache.fp16_bytes(), 2u * 2u * tokens * H * D);
  }
  EXPECT_EQ(cache.kv_heads(), H);
  EXPECT_EQ(cache.head_dim(), D);
  EXPECT_EQ(cache.spec().to_string(), "fp16");
}

// -------- decode --------

TEST(KVCache, HeldBytesFollowWhatTheBuffersTakeAndTheirPeak) {
  // 2048 tokens of 2 KV heads of 64, appended 256 at a time, as a prompt's micro-batches are.
  constexpr size_t n = 2048, heads = 2, d = 64, step = 256;
  const std::vector<float> k = test::gaussian(n * heads * d, 1), v = test::gaussian(n * heads * d, 2);
  const auto fill = [&](KVCache& c, bool one_prompt) {
    for (size_t t = 0; t < n; t += step) {
      if (one_prompt) c.continue_prompt(n - t - step);
      c.append(TensorView::f32(&k[t * heads * d], {step, heads, d}),
               TensorView::f32(&v[t * heads * d], {step, heads, d}));
      std::vector<float> q(step * heads * d, 0.5f), out(q.size());
      c.attend_observed(TensorView::f32(q.data(), {step, heads, d}), out.data());
      c.finish_step();
      EXPECT_GE(c.peak_held_bytes(), c.held_bytes());
    }
  };
  KVCache fp16("fp16", LayerShape{heads, d, 0, 0}), kivi("kivi", LayerShape{heads, d, 0, 0});
  fill(fp16, false);
  fill(kivi, false);
  // fp16 rows take at least their stored bytes; KIVI's codes and 128-token tail a fraction of it.
  EXPECT_GE(fp16.held_bytes(), fp16.bytes());
  EXPECT_LT(kivi.peak_held_bytes(), fp16.peak_held_bytes() / 2);
  // SnapKV holds the whole prompt until its last step, then gives back what it evicted.
  KVCache snap("snapkv:budget=256", LayerShape{heads, d, 0, 0});
  fill(snap, true);
  EXPECT_GE(snap.peak_held_bytes(), fp16.bytes());
  EXPECT_LT(snap.held_bytes(), snap.peak_held_bytes() / 4);
}

TEST(KVCache, DecodeReturnsFp16RoundedInputExactly) {
  const size_t H = 2, D = 24;
  KVCache cache("fp16", shape(H, D));
  std::vector<float> allk, allv;
  for (size_t n : {3u, 1u, 10u}) {
    auto k = gaussian(n * H * D, 10 + n, 3.0), v = gaussian(n * H * D, 20 + n, 0.01);
    k[0] = 1e-7f;      // f16 subnormal / zero range
    v[1] = 60000.25f;  // near the top of the f16 range
    cache.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
    allk.insert(allk.end(), k.begin(), k.end());
    allv.insert(allv.end(), v.begin(), v.end());
  }
  const auto dk = cache.decode_keys(), dv = cache.decode_values();
  ASSERT_EQ(dk.size(), allk.size());
  ASSERT_EQ(dv.size(), allv.size());
  for (size_t i = 0; i < allk.size(); ++i) {
    ASSERT_EQ(dk[i], round_f16(allk[i])) << i;
    ASSERT_EQ(dv[i], round_f16(allv[i])) << i;
  }
}

TEST(KVCache, AcceptsF16AndBf16Inputs) {
  const size_t H = 2, D = 16, n = 5;
  const auto x = gaussian(n * H * D, 77);
  std::vector<uint16_t> h(x.size()), b(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    h[i] = f32_to_f16(x[i]);
    b[i] = f32_to_bf16(x[i] * 3.0f);
  }
  KVCache cache("fp16", shape(H, D));
  cache.append(TensorView::f16(h.data(), {n, H, D}), TensorView::of(b.data(), DType::BF16, {n, H, D}));
  const auto dk = cache.decode_keys(), dv = cache.decode_values();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(dk[i], f16_to_f32(h[i]));                 // f16 input stored exactly
    ASSERT_EQ(dv[i], round_f16(bf16_to_f32(b[i])));     // bf16 rounded to f16
  }
  // f16 / bf16 queries give exactly what their f32 values give.
  const size_t qh = 4, nq = 2;
  const auto qf = gaussian(nq * qh * D, 78);
  std::vector<uint16_t> qh16(qf.size()), qb16(qf.size());
  std::vector<float> q16f(qf.size()), qb16f(qf.size());
  for (size_t i = 0; i < qf.size(); ++i) {
    qh16[i] = f32_to_f16(qf[i]);
    qb16[i] = f32_to_bf16(qf[i]);
    q16f[i] = f16_to_f32(qh16[i]);
    qb16f[i] = bf16_to_f32(qb16[i]);
  }
  std::vector<float> o1(qf.size()), o2(qf.size());
  cache.attend(TensorView::f16(qh16.data(), {nq, qh, D}), o1.data());
  cache.attend(TensorView::f32(q16f.data(), {nq, qh, D}), o2.data());
  EXPECT_EQ(o1, o2);
  cache.attend(TensorView::of(qb16.data(), DType::BF16, {nq, qh, D}), o1.data());
  cache.attend(TensorView::f32(qb16f.data(), {nq, qh, D}), o2.data());
  EXPECT_EQ(o1, o2);
}

// -------- attention vs oracle --------

struct AttnCase {
  size_t kv_heads, group, dim;
  std::vector<size_t> appends;
  size_t nq;
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "kv_heads=" << c.kv_heads << " group=" << c.group << " dim=" << c.dim << " nq=" << c.nq;
}

class AttentionOracle : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionOracle, MatchesDoublePrecisionCausalAttention) {
  const AttnCase& c = GetParam();
  const size_t H = c.kv_heads, D = c.dim, qh = H * c.group;
  KVCache cache("fp16", shape(H, D, 5));
  std::vector<float> k, v;
  size_t tokens = 0;
  for (size_t n : c.appends) {
    // An outlier key channel (as in real models) makes the softmax uneven, so mask or
    // head-mapping mistakes change the output a lot.
    auto kn = gaussian(n * H * D, 100 + tokens), vn = gaussian(n * H * D, 200 + tokens);
    for (size_t t = 0; t < n * H; ++t) kn[t * D] *= 4.0f;
    cache.append(kv_view(kn, n, H, D), kv_view(vn, n, H, D));
    k.insert(k.end(), kn.begin(), kn.end());
    v.insert(v.end(), vn.begin(), vn.end());
    tokens += n;
  }
  ASSERT_EQ(cache.tokens(), tokens);
  const auto q = gaussian(c.nq * qh * D, 300);
  std::vector<float> fused(q.size(), std::nanf("")), ref(q.size(), std::nanf("")),
      decoded(q.size(), std::nanf(""));
  cache.attend(TensorView::f32(q.data(), {c.nq, qh, D}), fused.data(), AttendPath::Fused);
  cache.attend(TensorView::f32(q.data(), {c.nq, qh, D}), ref.data(), AttendPath::Reference);
  cache.attend(TensorView::f32(q.data(), {c.nq, qh, D}), decoded.data(), AttendPath::Decoded);

  // Against the original f32 data: the only loss is fp16 storage.
  const auto exact = oracle(q, c.nq, qh, k, v, tokens, H, D);
  EXPECT_LT(max_row_rel_err(fused, exact, D), 2e-3);
  EXPECT_LT(max_row_rel_err(ref, exact, D), 2e-3);

  // Against the fp16-rounded data the cache really stores: only f32 arithmetic error remains.
  std::vector<float> k16(k), v16(v);
  for (auto& x : k16) x = round_f16(x);
  for (auto& x : v16) x = round_f16(x);
  const auto stored = oracle(q, c.nq, qh, k16, v16, tokens, H, D);
  EXPECT_LT(max_row_rel_err(fused, stored, D), 1e-5);
  EXPECT_LT(max_row_rel_err(ref, stored, D), 1e-5);
  EXPECT_LT(max_row_rel_err(decoded, stored, D), 1e-5);

  // Fused and reference paths agree.
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_NEAR(fused[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionOracle,
    ::testing::Values(AttnCase{1, 1, 64, {40}, 1}, AttnCase{1, 4, 64, {17, 1, 22}, 3},
                      AttnCase{2, 2, 128, {9, 30, 1, 1}, 6}, AttnCase{4, 1, 32, {50}, 50},
                      AttnCase{2, 3, 100, {8, 8, 8}, 5}, AttnCase{3, 8, 16, {1, 1, 1, 1, 1}, 2},
                      AttnCase{2, 4, 7, {33}, 33}, AttnCase{1, 6, 96, {64, 64}, 4},
                      // Many query rows, as in a prefill (AttendPath::Auto picks Decoded there).
                      AttnCase{2, 3, 16, {120, 80}, 150}));

// 1100 query tokens of 8 query heads over 2048 tokens hold more scores than kScoreFloats (2^24):
// the decoded path takes the rows in chunks, and each row must come out as it would alone. A
// codec that decodes in its own basis (turboquant_mse) rotates the queries of every chunk.
TEST(KVCache, DecodedPathTakesLongPrefillsInChunks) {
  const size_t H = 4, group = 8, D = 16, n = 2048, nq = 1100, qh = H * group;
  auto k = gaussian(n * H * D, 1), v = gaussian(n * H * D, 2);
  const auto q = gaussian(nq * qh * D, 3);
  std::vector<float> decoded(q.size(), std::nanf("")), ref(q.size(), std::nanf(""));
  KVCache tq("turboquant_mse:bits=4,vbits=4", shape(H, D, 5));
  tq.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
  tq.attend(TensorView::f32(q.data(), {nq, qh, D}), decoded.data(), AttendPath::Decoded);
  tq.attend(TensorView::f32(q.data(), {nq, qh, D}), ref.data(), AttendPath::Reference);
  EXPECT_LT(max_row_rel_err(decoded, std::vector<double>(ref.begin(), ref.end()), D), 1e-4);

  KVCache fp16("fp16", shape(H, D, 5));
  fp16.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
  fp16.attend(TensorView::f32(q.data(), {nq, qh, D}), decoded.data(), AttendPath::Decoded);
  for (float& x : k) x = round_f16(x);
  for (float& x : v) x = round_f16(x);
  EXPECT_LT(max_row_rel_err(decoded, oracle(q, nq, qh, k, v, n, H, D), D), 1e-5);
}

TEST(KVCache, CausalMaskHidesFutureTokens) {
  // One-hot values: the output weight on token t is exactly the attention probability, so masked
  // tokens must contribute exactly zero.
  const size_t D = 8, tokens = 6, nq = 3;
  std::vector<float> k(tokens * D, 0.0f), v(tokens * D, 0.0f);
  for (size_t t = 0; t < tokens; ++t) {
    v[t * D + t] = 1.0f;
    k[t * D + 7] = static_cast<float>(t);  // later tokens score higher for a query along e_7
  }
  KVCache cache("fp16", shape(1, D));
  cache.append(kv_view(k, tokens, 1, D), kv_view(v, tokens, 1, D));
  std::vector<float> q(nq * D, 0.0f), out(nq * D);
  for (size_t i = 0; i < nq; ++i) q[i * D + 7] = 1.0f;
  for (AttendPath path : {AttendPath::Fused, AttendPath::Reference}) {
    cache.attend(TensorView::f32(q.data(), {nq, 1, D}), out.data(), path);
    for (size_t i = 0; i < nq; ++i) {
      const size_t last = tokens - nq + i;  // last visible token
      double denom = 0;
      for (size_t t = 0; t <= last; ++t) denom += std::exp(static_cast<double>(t) / std::sqrt(8.0));
      for (size_t t = 0; t < D; ++t) {
        const double expect = t <= last ? std::exp(static_cast<double>(t) / std::sqrt(8.0)) / denom : 0.0;
        EXPECT_NEAR(out[i * D + t], expect, 1e-6) << "query " << i << " token " << t;
      }
    }
  }
}

TEST(KVCache, DeterministicAcrossInstances) {
  const size_t H = 2, D = 32, n = 20;
  const auto k = gaussian(n * H * D, 1), v = gaussian(n * H * D, 2), q = gaussian(2 * 4 * D, 3);
  std::vector<float> o1(q.size()), o2(q.size());
  KVCache a("fp16", shape(H, D)), b("fp16", shape(H, D));
  a.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
  b.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
  a.attend(TensorView::f32(q.data(), {2, 4, D}), o1.data());
  b.attend(TensorView::f32(q.data(), {2, 4, D}), o2.data());
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(a.decode_keys(), b.decode_keys());
}

TEST(KVCache, MoveConstructionAndAssignment) {
  const size_t H = 2, D = 16, n = 7;
  const auto k = gaussian(n * H * D, 4), v = gaussian(n * H * D, 5), q = gaussian(2 * H * D, 6);
  KVCache a("fp16", shape(H, D));
  a.append(kv_view(k, n, H, D), kv_view(v, n, H, D));
  std::vector<float> before(q.size()), after(q.size());
  a.attend(TensorView::f32(q.data(), {1, H, D}), before.data());
  const auto keys = a.decode_keys();
  const size_t bytes = a.bytes();

  KVCache b(std::move(a));
  EXPECT_EQ(b.tokens(), n);
  EXPECT_EQ(b.bytes(), bytes);
  EXPECT_EQ(b.decode_keys(), keys);
  b.attend(TensorView::f32(q.data(), {1, H, D}), after.data());
  EXPECT_EQ(before, after);
  b.append(kv_view(k, 1, H, D), kv_view(v, 1, H, D));
  EXPECT_EQ(b.tokens(), n + 1);

  KVCache c("fp16", shape(1, 4));
  c = std::move(b);
  EXPECT_EQ(c.tokens(), n + 1);
  EXPECT_EQ(c.kv_heads(), H);
  EXPECT_EQ(c.head_dim(), D);
  c.attend(TensorView::f32(q.data(), {2, H, D}), after.data());
  for (float x : after) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace veloxquant
