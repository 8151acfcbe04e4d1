// KIVI (Liu et al., ICML 2024): per-channel keys, per-token values, asymmetric min/max, the
// recent tokens in fp16, and the integer fused kernels against their scalar references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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
  for (size_t b = 0; b < n / group; ++b) {
    const uint8_t* block = codes.data() + codec.code_bytes(b * group);
    for (size_t c = 0; c < d; ++c) {
      const float step = f16_to_f32(halves(block)[c]);
      for (size_t t = b * group; t < (b + 1) * group; ++t)
        ASSERT_LE(std::fabs(y[t * d + c] - x[t * d + c]), 0.5f * step * (1 + 1e-5f) + 1e-7f)
            << "token " << t << " channel " << c;
    }
  }
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
  const size_t quad_bytes = 4 * d * bits / 8;
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) {
      const uint8_t* block = codes.data() + codec.code_bytes(t / 4 * 4);
      const float step = f16_to_f32(halves(block + quad_bytes)[(c / group) * 4 + t % 4]);
      ASSERT_LE(std::fabs(y[t * d + c] - x[t * d + c]), 0.5f * step * (1 + 1e-5f) + 1e-7f)
          << "token " << t << " channel " << c;
    }
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
  const SyntheticKV w = make_synthetic_kv(2000, 2, 128, 4, 3, bits);
  const std::string spec = "kivi:kbits=" + std::to_string(bits) + ",vbits=" + std::to_string(bits) + ",residual=64";
  KVCache cache(spec, LayerShape{2, 128, 0, 0});
  cache.append(TensorView::f32(w.keys.data(), {2000, 2, 128}), TensorView::f32(w.values.data(), {2000, 2, 128}));
  const std::vector<float> exact = exact_attention(w.queries.data(), 3, w.q_heads, w.keys.data(), w.values.data(), 2000, 2, 128);
  std::vector<float> fused(exact.size()), ref(exact.size());
  const TensorView q = TensorView::f32(w.queries.data(), {3, w.q_heads, 128});
  cache.attend(q, fused.data(), AttendPath::Fused);
  cache.attend(q, ref.data(), AttendPath::Reference);
  double gap = 0, err = 0, norm = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    gap += (fused[i] - ref[i]) * static_cast<double>(fused[i] - ref[i]);
    err += (ref[i] - exact[i]) * static_cast<double>(ref[i] - exact[i]);
    norm += exact[i] * static_cast<double>(exact[i]);
  }
  EXPECT_LE(std::sqrt(gap), 0.1 * std::sqrt(err) + 1e-4 * std::sqrt(norm)) << spec;
}

INSTANTIATE_TEST_SUITE_P(Bits, KiviBits, ::testing::Values(2u, 4u, 8u),
                         [](const auto& param_info) { return "b" + std::to_string(param_info.param); });

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
  EXPECT_THROW(KVCache("kivi:vbits=2", LayerShape{1, 40, 0, 0}), SpecError);
  EXPECT_THROW(parse_spec("kivi:kbits=1"), SpecError);
  try {
    KVCache("kivi:kbits=3", LayerShape{1, 128, 0, 0});
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("kbits=3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace veloxquant::kivi
