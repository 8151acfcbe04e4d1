// KIVI (Liu et al., ICML 2024): per-channel keys, per-token values, asymmetric min/max, the
// recent tokens in fp16, and the integer fused kernels against their scalar references.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "codecs/kivi/dense_codes.h"
#include "codecs/kivi/key_block_scores.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/kivi/lane_tiles.h"
#include "codecs/kivi/value_span_sums.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "test_data.h"

namespace veloxquant::kivi {
namespace {

using test::gaussian;

const uint16_t* halves(const uint8_t* p) { return reinterpret_cast<const uint16_t*>(p); }

// Every decoded key is within half of its channel's step, the fp16 scale at the head of the
// token group's block.
void expect_keys_within_half_step(const KiviKeyCodec& codec, const std::vector<uint8_t>& codes,
                                  const std::vector<float>& x, const std::vector<float>& y,
                                  size_t n, size_t d, size_t group) {
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      const float step = f16_to_f32(halves(codes.data() + codec.code_bytes(t / group * group))[c]);
      ASSERT_LE(std::fabs(y[t * d + c] - x[t * d + c]), 0.5f * step * (1 + 1e-5f) + 1e-7f)
          << "key token " << t << " channel " << c;
    }
}

// Every decoded value is within half of its token group's step; the steps of a block of four
// tokens follow the block's codes, value group by value group.
void expect_values_within_half_step(const KiviValueCodec& codec, const std::vector<uint8_t>& codes,
                                    const std::vector<float>& x, const std::vector<float>& y,
                                    size_t n, size_t d, size_t bits, size_t vgroup) {
  const size_t quad_bytes = 4 * d * bits / 8;
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      const uint8_t* block = codes.data() + codec.code_bytes(t / 4 * 4);
      const float step = f16_to_f32(halves(block + quad_bytes)[(c / vgroup) * 4 + t % 4]);
      ASSERT_LE(std::fabs(y[t * d + c] - x[t * d + c]), 0.5f * step * (1 + 1e-5f) + 1e-7f)
          << "value token " << t << " channel " << c;
    }
}

// Fused attention over a whole two-head cache stays within 10% of the method's own error
// (attention on the decoded cache against exact attention), plus float rounding.
void expect_fused_close_to_decoded(const std::string& spec, size_t tokens, size_t d,
                                   size_t q_per_kv, uint64_t seed) {
  const SyntheticKV w = make_synthetic_kv(tokens, 2, d, q_per_kv, 3, seed);
  KVCache cache(spec, LayerShape{2, d, 0, 0});
  cache.append(TensorView::f32(w.keys.data(), {tokens, 2, d}), TensorView::f32(w.values.data(), {tokens, 2, d}));
  const std::vector<float> exact = exact_attention(w.queries.data(), 3, w.q_heads, w.keys.data(), w.values.data(), tokens, 2, d);
  std::vector<float> fused(exact.size()), ref(exact.size());
  const TensorView q = TensorView::f32(w.queries.data(), {3, w.q_heads, d});
  cache.attend(q, fused.data(), AttendPath::Fused);
  cache.attend(q, ref.data(), AttendPath::Reference);
  double gap = 0, err = 0, norm = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    gap += (fused[i] - ref[i]) * static_cast<double>(fused[i] - ref[i]);
    err += (ref[i] - exact[i]) * static_cast<double>(ref[i] - exact[i]);
    norm += exact[i] * static_cast<double>(exact[i]);
  }
  EXPECT_LE(std::sqrt(gap), 0.1 * std::sqrt(err) + 1e-4 * std::sqrt(norm)) << spec << ", head_dim " << d;
  EXPECT_LT(std::sqrt(err), std::sqrt(norm)) << spec << ", head_dim " << d;
}

class KiviBits : public ::testing::TestWithParam<unsigned> {};

// Every key element is within half of its channel's stored step of the input.
TEST_P(KiviBits, KeyErrorIsAtMostHalfAStep) {
  const unsigned bits = GetParam();
  const size_t d = 128, group = 32, n = 4 * group;
  std::vector<float> x = gaussian(n * d, bits);
  for (size_t t = 0; t < n; ++t) x[t * d + 5] *= 40.0f;  // an outlier channel
  const KiviKeyCodec codec(d, bits, group);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> y(n * d);
  codec.decode(codes.data(), n, y.data());
  expect_keys_within_half_step(codec, codes, x, y, n, d, group);
}

TEST_P(KiviBits, ValueErrorIsAtMostHalfAStep) {
  const unsigned bits = GetParam();
  const size_t d = 128, group = 32, n = 64, groups = d / group;
  std::vector<float> x = gaussian(n * d, 100 + bits);
  x[7 * d + 3] = 90.0f;  // one outlier element
  const KiviValueCodec codec(d, bits, group);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> y(n * d);
  codec.decode(codes.data(), n, y.data());
  expect_values_within_half_step(codec, codes, x, y, n, d, bits, group);
  EXPECT_EQ(groups, 4u);
}

// The paper's reason for per-channel keys: an outlier channel does not degrade the others.
TEST_P(KiviBits, KeyOutlierChannelStaysIsolated) {
  const unsigned bits = GetParam();
  const size_t d = 64, group = 32, n = group;
  const std::vector<float> x = gaussian(n * d, 7);
  std::vector<float> with_outlier = x;
  for (size_t t = 0; t < n; ++t) with_outlier[t * d + 9] = 100.0f + 50.0f * x[t * d + 9];
  const KiviKeyCodec codec(d, bits, group);
  std::vector<uint8_t> a(codec.code_bytes(n)), b(codec.code_bytes(n));
  codec.encode(x.data(), n, a.data());
  codec.encode(with_outlier.data(), n, b.data());
  std::vector<float> ya(n * d), yb(n * d);
  codec.decode(a.data(), n, ya.data());
  codec.decode(b.data(), n, yb.data());
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      if (c != 9) {
        ASSERT_EQ(ya[t * d + c], yb[t * d + c]) << "channel " << c;
      }
    }
}

// Per-token values: a huge token does not change how the other tokens are stored.
TEST_P(KiviBits, ValueOutlierTokenStaysIsolated) {
  const unsigned bits = GetParam();
  const size_t d = 64, n = 8;
  const std::vector<float> x = gaussian(n * d, 8);
  std::vector<float> with_outlier = x;
  for (size_t c = 0; c < d; ++c) with_outlier[2 * d + c] *= 300.0f;
  const KiviValueCodec codec(d, bits, 32);
  std::vector<uint8_t> a(codec.code_bytes(n)), b(codec.code_bytes(n));
  codec.encode(x.data(), n, a.data());
  codec.encode(with_outlier.data(), n, b.data());
  std::vector<float> ya(n * d), yb(n * d);
  codec.decode(a.data(), n, ya.data());
  codec.decode(b.data(), n, yb.data());
  for (size_t t = 0; t < n; ++t) {
    if (t == 2) continue;
    for (size_t c = 0; c < d; ++c) ASSERT_EQ(ya[t * d + c], yb[t * d + c]) << "token " << t;
  }
}

TEST_P(KiviBits, LaneTilesRoundTripExactly) {
  const unsigned bits = GetParam(), levels = 1u << bits;
  for (size_t d : {64u, 128u, 256u}) {
    Rng rng(d + bits);
    std::vector<uint8_t> codes(16 * d), back(16 * d), packed(16 * d * bits / 8);
    for (auto& c : codes) c = static_cast<uint8_t>(rng.next_u64() % levels);
    pack_key_tile(codes.data(), d, bits, packed.data());
    unpack_key_tile(packed.data(), d, bits, back.data());
    ASSERT_EQ(codes, back) << "key tile, dim " << d;
    codes.resize(4 * d);
    back.resize(4 * d);
    packed.resize(4 * d * bits / 8);
    pack_value_quad(codes.data(), d, bits, packed.data());
    unpack_value_quad(packed.data(), d, bits, back.data());
    ASSERT_EQ(codes, back) << "value quad, dim " << d;
  }
}

// The vector kernels compute the same integer sums as the scalar references.
TEST_P(KiviBits, KeyKernelMatchesScalarReference) {
  const unsigned bits = GetParam();
  const size_t d = 128, group = 32;
  const std::vector<float> x = gaussian(group * d, 11), q = gaussian(4 * d, 12);
  const KiviKeyCodec codec(d, bits, group);
  std::vector<uint8_t> codes(codec.code_bytes(group));
  codec.encode(x.data(), group, codes.data());
  for (size_t nq = 1; nq <= 4; ++nq) {
    std::vector<float> fast(nq * group), ref(nq * group);
    score_key_block(codes.data(), d, bits, group, q.data(), nq, fast.data(), group);
    score_key_block_reference(codes.data(), d, bits, group, q.data(), nq, ref.data(), group);
    for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-4f * (1 + std::fabs(ref[i])));
  }
}

TEST_P(KiviBits, ValueKernelMatchesScalarReference) {
  const unsigned bits = GetParam();
  const size_t d = 128, group = 32, quads = kQuadsPerSpan, n = 4 * quads;
  const std::vector<float> x = gaussian(n * d, 13);
  std::vector<float> w = gaussian(4 * n, 14);
  for (auto& v : w) v = std::fabs(v);
  const KiviValueCodec codec(d, bits, group);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  const size_t block_bytes = codec.code_bytes(4);
  for (size_t nq = 1; nq <= 4; ++nq) {
    std::vector<float> fast(nq * d, 0.5f), ref(nq * d, 0.5f), off_fast(nq * 4), off_ref(nq * 4);
    accumulate_value_span(codes.data(), block_bytes, quads, d, bits, group, w.data(), n, nq, fast.data(), off_fast.data());
    accumulate_value_span_reference(codes.data(), block_bytes, quads, d, bits, group, w.data(), n, nq, ref.data(), off_ref.data());
    for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-4f * (1 + std::fabs(ref[i])));
    for (size_t i = 0; i < off_fast.size(); ++i) ASSERT_NEAR(off_fast[i], off_ref[i], 1e-4f * (1 + std::fabs(off_ref[i])));
  }
}

// Fused attention stays close to attention on the decoded cache, at every bit width.
TEST_P(KiviBits, FusedAttentionMatchesDecodedAttention) {
  const unsigned bits = GetParam();
  expect_fused_close_to_decoded("kivi:kbits=" + std::to_string(bits) + ",vbits=" + std::to_string(bits) +
                                    ",residual=64",
                                2000, 128, 4, bits);
}

INSTANTIATE_TEST_SUITE_P(Bits, KiviBits, ::testing::Values(2u, 4u, 8u),
                         [](const auto& param_info) { return "b" + std::to_string(param_info.param); });

// Head dims the lane tiles do not fit (head_dim 8 of stories260K, 40, 80, 96, odd sizes) take the
// dense layout (dense_codes.h): same bytes per element, same error bound, attention on the codes.
class KiviHeadDims : public ::testing::TestWithParam<std::tuple<size_t, unsigned>> {};

TEST_P(KiviHeadDims, ChoosesTheLayoutAndKeepsBytesProportional) {
  const auto [d, bits] = GetParam();
  const size_t group = 32, vgroup = std::min<size_t>(group, d), vgroups = (d + vgroup - 1) / vgroup;
  const KiviKeyCodec keys(d, bits, group);
  const KiviValueCodec values(d, bits, group);
  EXPECT_EQ(keys.lane_tiles(), d % (32 / bits) == 0);
  EXPECT_EQ(values.lane_tiles(), d % (128 / bits) == 0 && vgroup % 16 == 0 && d % vgroup == 0);
  // Codes take exactly bits per element; fp16 scale and minimum per channel and key group, per
  // token and value group. Nothing is padded.
  EXPECT_EQ(keys.code_bytes(group), 4 * d + group * d * bits / 8);
  EXPECT_EQ(values.code_bytes(4), 4 * d * bits / 8 + 16 * vgroups);
}

TEST_P(KiviHeadDims, ErrorIsAtMostHalfAStep) {
  const auto [d, bits] = GetParam();
  const size_t group = 32, n = 2 * group, vgroup = std::min<size_t>(group, d), vgroups = (d + vgroup - 1) / vgroup;
  std::vector<float> x = gaussian(n * d, 40 + d + bits);
  for (size_t t = 0; t < n; ++t) x[t * d + d / 2] *= 30.0f;  // an outlier channel
  const KiviKeyCodec keys(d, bits, group);
  std::vector<uint8_t> codes(keys.code_bytes(n));
  keys.encode(x.data(), n, codes.data());
  std::vector<float> y(n * d);
  keys.decode(codes.data(), n, y.data());
  expect_keys_within_half_step(keys, codes, x, y, n, d, group);
  const KiviValueCodec values(d, bits, group);
  codes.assign(values.code_bytes(n), 0);
  values.encode(x.data(), n, codes.data());
  values.decode(codes.data(), n, y.data());
  expect_values_within_half_step(values, codes, x, y, n, d, bits, vgroup);
  const size_t quad_bytes = 4 * d * bits / 8;
  // The last value group of a token has its own grid: with an outlier in it, the full groups
  // before it keep a small step.
  if (vgroups > 1) {
    std::vector<float> z = gaussian(4 * d, 3);
    for (size_t c = (vgroups - 1) * vgroup; c < d; ++c) z[c] *= 100.0f;
    codes.assign(values.code_bytes(4), 0);
    values.encode(z.data(), 4, codes.data());
    EXPECT_LT(f16_to_f32(halves(codes.data() + quad_bytes)[0]) * 20,
              f16_to_f32(halves(codes.data() + quad_bytes)[(vgroups - 1) * 4]));
  }
}

// The dense kernels compute the same sums as their element-by-element double references.
TEST_P(KiviHeadDims, DenseKernelsMatchScalarReferences) {
  const auto [d, bits] = GetParam();
  const size_t group = 32, n = 3 * group;
  const std::vector<float> x = gaussian(n * d, 60 + d), q = gaussian(5 * d, 61 + d);
  std::vector<float> w = gaussian(5 * n, 62 + d);
  for (auto& v : w) v = std::fabs(v);
  float xmax = 0;
  for (float v : x) xmax = std::max(xmax, std::fabs(v));
  const KiviKeyCodec keys(d, bits, group);
  std::vector<uint8_t> codes(keys.code_bytes(n));
  keys.encode(x.data(), n, codes.data());
  for (size_t nq = 1; nq <= 5; nq += 2) {
    std::vector<float> fast(nq * n), ref(nq * n);
    score_dense_keys(codes.data(), n / group, keys.code_bytes(group), d, bits, group, q.data(), nq, fast.data(), n);
    score_dense_keys_reference(codes.data(), n / group, keys.code_bytes(group), d, bits, group, q.data(), nq, ref.data(), n);
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_NEAR(fast[i], ref[i], 1e-5f * (std::sqrt(float(d)) + std::fabs(ref[i]))) << "key score " << i;
  }
  for (size_t vgroup : {size_t{16}, size_t{32}, d}) {  // groups of 16 / 32 channels (a shorter last one), one per token
    const KiviValueCodec values(d, bits, vgroup);
    codes.assign(values.code_bytes(n), 0);
    values.encode(x.data(), n, codes.data());
    for (size_t nq = 1; nq <= 5; nq += 2) {
      std::vector<float> fast(nq * d, 0.5f), ref(nq * d, 0.5f);
      accumulate_dense_values(codes.data(), n / 4, values.code_bytes(4), d, bits, std::min(vgroup, d), w.data(), n, nq, fast.data());
      accumulate_dense_values_reference(codes.data(), n / 4, values.code_bytes(4), d, bits, std::min(vgroup, d), w.data(), n, nq, ref.data());
      // f32 against double: the scale and minimum terms are each about sum_t w_t max|x| and
      // cancel, so the bound is relative to that size.
      for (size_t i = 0; i < fast.size(); ++i) {
        float wsum = 0;
        for (size_t t = 0; t < n; ++t) wsum += w[i / d * n + t];
        ASSERT_NEAR(fast[i], ref[i], 4e-6f * wsum * xmax) << "value sum " << i << ", vgroup " << vgroup;
      }
    }
  }
}

// Whatever the layout, the codecs' score() and accumulate() agree with decode-then-compute.
TEST_P(KiviHeadDims, FusedCodecPathsMatchDecodedVectors) {
  const auto [d, bits] = GetParam();
  const size_t group = 32, n = 4 * group, nq = 6;
  const std::vector<float> x = gaussian(n * d, 70 + d), q = gaussian(nq * d, 71 + d);
  std::vector<float> w = gaussian(nq * n, 72 + d);
  for (auto& v : w) v = std::fabs(v) / float(n);
  const KiviKeyCodec keys(d, bits, group);
  std::vector<uint8_t> codes(keys.code_bytes(n));
  keys.encode(x.data(), n, codes.data());
  std::vector<float> fused(nq * n), ref(nq * n);
  keys.score(q.data(), nq, codes.data(), n, fused.data());
  keys.Codec::score(q.data(), nq, codes.data(), n, ref.data());
  for (size_t i = 0; i < fused.size(); ++i)
    ASSERT_NEAR(fused[i], ref[i], 2e-3f * (std::sqrt(float(d)) + std::fabs(ref[i]))) << "score " << i;
  const KiviValueCodec values(d, bits, group);
  codes.assign(values.code_bytes(n), 0);
  values.encode(x.data(), n, codes.data());
  std::vector<float> a(nq * d, 0.25f), b(nq * d, 0.25f);
  values.accumulate(w.data(), nq, codes.data(), n, a.data());
  values.Codec::accumulate(w.data(), nq, codes.data(), n, b.data());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-3f * (1.0f + std::fabs(b[i]))) << "sum " << i;
}

// The whole cache at these head dims: fused attention within 10% of the method's own error.
TEST_P(KiviHeadDims, FusedAttentionMatchesDecodedAttention) {
  const auto [d, bits] = GetParam();
  expect_fused_close_to_decoded("kivi:kbits=" + std::to_string(bits) + ",vbits=" + std::to_string(bits) +
                                    ",residual=32",
                                700, d, 2, d + bits);
}

// 8: stories260K (dense keys at 2 bits, dense values); 2, 6, 30: tiny and odd-ish sizes; 40, 80,
// 96: dense values with lane-tile keys (80 and 40 with a shorter last value group); 128: tiles.
INSTANTIATE_TEST_SUITE_P(Shapes, KiviHeadDims,
                         ::testing::Combine(::testing::Values(size_t{2}, size_t{6}, size_t{8}, size_t{30}, size_t{40},
                                                              size_t{80}, size_t{96}, size_t{128}),
                                            ::testing::Values(2u, 4u, 8u)),
                         [](const auto& param_info) {
                           return "d" + std::to_string(std::get<0>(param_info.param)) + "_b" + std::to_string(std::get<1>(param_info.param));
                         });

TEST(Kivi, DefaultSpecRunsAtEveryCommonHeadDim) {
  for (size_t d : {8, 64, 80, 96, 128, 256}) {
    const SyntheticKV w = make_synthetic_kv(200, 4, d, 2, 1, d);
    for (const char* spec : {"kivi", "kivi:residual=0"}) {
      KVCache cache(spec, LayerShape{4, d, 0, 0});
      cache.append(TensorView::f32(w.keys.data(), {200, 4, d}), TensorView::f32(w.values.data(), {200, 4, d}));
      std::vector<float> out(w.q_heads * d);
      cache.attend(TensorView::f32(w.queries.data(), {1, w.q_heads, d}), out.data());
      for (float x : out) ASSERT_TRUE(std::isfinite(x)) << spec << ", head_dim " << d;
    }
  }
}

// The bar: 2-bit KIVI with no fp16 window compresses K+V at least 5x.
TEST(Kivi, TwoBitWithoutResidualCompressesFiveFold) {
  const SyntheticKV w = make_synthetic_kv(4096, 2, 128, 1, 1, 3);
  KVCache cache("kivi:kbits=2,vbits=2,residual=0", LayerShape{2, 128, 0, 0});
  cache.append(TensorView::f32(w.keys.data(), {4096, 2, 128}), TensorView::f32(w.values.data(), {4096, 2, 128}));
  // keys: 32 B codes + 16 B scale/min per token; values: 32 B codes + 16 B per token
  EXPECT_EQ(cache.bytes(), 2u * 4096 * (48 + 48));
  EXPECT_GE(static_cast<double>(cache.fp16_bytes()) / static_cast<double>(cache.bytes()), 5.0);
}

TEST(Kivi, ResidualWindowStaysExactUntilAGroupAgesOut) {
  const size_t d = 64, r = 16;
  const std::vector<float> x = gaussian(80 * d, 5);
  KVCache cache("kivi:group=32,residual=" + std::to_string(r), LayerShape{1, d, 0, 0});
  cache.append(TensorView::f32(x.data(), {47, 1, d}), TensorView::f32(x.data(), {47, 1, d}));
  // 47 < residual + group: nothing is quantized yet, so every key comes back as its fp16 rounding.
  const std::vector<float> k = cache.decode_keys();
  for (size_t i = 0; i < 47 * d; ++i) ASSERT_EQ(k[i], f16_to_f32(f32_to_f16(x[i])));
  cache.append(TensorView::f32(x.data() + 47 * d, {1, 1, d}), TensorView::f32(x.data() + 47 * d, {1, 1, d}));
  // 48 = residual + group: the oldest 32 keys are now quantized, the newest 16 are exact.
  const std::vector<float> k2 = cache.decode_keys();
  double moved = 0;
  for (size_t i = 0; i < 32 * d; ++i) moved += std::fabs(k2[i] - f16_to_f32(f32_to_f16(x[i])));
  EXPECT_GT(moved, 0);
  for (size_t i = 32 * d; i < 48 * d; ++i) ASSERT_EQ(k2[i], f16_to_f32(f32_to_f16(x[i])));
}

TEST(Kivi, RejectsUnsupportedParameters) {
  EXPECT_THROW(KVCache("kivi:kbits=3", LayerShape{1, 128, 0, 0}), SpecError);
  EXPECT_THROW(KVCache("kivi:vbits=5", LayerShape{1, 128, 0, 0}), SpecError);
  EXPECT_THROW(KVCache("kivi:group=24", LayerShape{1, 128, 0, 0}), SpecError);
  EXPECT_THROW(KVCache("kivi:group=24", LayerShape{1, 8, 0, 0}), SpecError);  // keys need it too
  EXPECT_THROW(parse_spec("kivi:kbits=1"), SpecError);
  try {
    const KVCache cache("kivi:group=40", LayerShape{1, 8, 0, 0});
    ADD_FAILURE() << "group=40 was accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("group=40"), std::string::npos) << e.what();
  }
  try {
    KVCache("kivi:kbits=3", LayerShape{1, 128, 0, 0});
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("kbits=3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace veloxquant::kivi
