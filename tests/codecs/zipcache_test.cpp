// ZipCache (per-token mixed precision by saliency): exactly the k tokens with the highest given
// attention get the high bits (bitmap checked), the norm ranks them without attention; every
// token decodes within half a step of its own grid at its own bit width; hi_fraction 1 and 0 are
// all-high and all-low; channel-separable keys beat plain per-token keys on outlier channels;
// the byte count, the corrupt-code checks and the parameter checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/zipcache/zipcache_codec.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"

namespace veloxquant::zipcache {
namespace {

using test::round_trip;
using test::sq_error;

// Keys (outlier channels, an attention sink at token 0) or heavy-tailed values of one head.
std::vector<float> synthetic(size_t n, size_t d, uint64_t seed, bool keys) {
  SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, seed);
  return keys ? w.keys : w.values;
}

ZipCacheCodec make(size_t d, size_t block, double fraction, bool keys, unsigned hi = 4, unsigned lo = 2,
                   Saliency saliency = Saliency::Attention) {
  return ZipCacheCodec(d, block, salient_tokens(fraction, block), hi, lo, keys, saliency);
}

std::vector<uint8_t> encoded(const ZipCacheCodec& codec, const std::vector<float>& x, size_t n,
                             const float* attention) {
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode_salient(x.data(), n, attention, codes.data());
  return codes;
}

bool salient(const ZipCacheCodec& codec, const std::vector<uint8_t>& codes, size_t t) {
  const size_t g = codec.block_tokens();
  const uint8_t* bitmap = codes.data() + t / g * codec.block_bytes();
  return ((bitmap[t % g / 8] >> (t % g % 8)) & 1u) != 0;
}

// Which tokens of each block should be salient: the k highest scores, ties to the lower position.
std::vector<bool> top_k(const std::vector<double>& score, size_t block, size_t k) {
  std::vector<bool> chosen(score.size(), false);
  for (size_t b = 0; b < score.size() / block; ++b) {
    std::vector<size_t> order(block);
    std::iota(order.begin(), order.end(), b * block);
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return score[i] > score[j]; });
    for (size_t i = 0; i < k; ++i) chosen[order[i]] = true;
  }
  return chosen;
}

std::vector<double> norms(const std::vector<float>& x, size_t d) {
  std::vector<double> s(x.size() / d, 0.0);
  for (size_t i = 0; i < x.size(); ++i) s[i / d] += static_cast<double>(x[i]) * x[i];
  return s;
}

// Attention that disagrees with the norm: random, with runs of equal scores to exercise ties.
std::vector<float> random_attention(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> a(n);
  for (size_t t = 0; t < n; ++t) a[t] = t % 5 == 3 ? a[t - 1] : static_cast<float>(rng.uniform());
  return a;
}

// Each element decodes within half a step of its token's grid at the token's bit width: the
// grid spans the token's (channel-normalized, for keys) values, c = sqrt(max |x|) per channel
// over the block. 1 % and 1e-3 |x| of slack for the fp16 rounding of step, minimum and scale.
void expect_within_token_bounds(const ZipCacheCodec& codec, const std::vector<uint8_t>& codes,
                                const std::vector<float>& x, size_t n, bool keys, unsigned hi, unsigned lo) {
  const size_t d = codec.dim(), g = codec.block_tokens();
  std::vector<float> y(x.size());
  codec.decode(codes.data(), n, y.data());
  for (size_t b = 0; b < n / g; ++b) {
    std::vector<double> c(d, 1.0);
    for (size_t ch = 0; keys && ch < d; ++ch) {
      double m = 0;
      for (size_t t = 0; t < g; ++t) m = std::max(m, std::fabs(static_cast<double>(x[(b * g + t) * d + ch])));
      c[ch] = std::sqrt(m);
    }
    for (size_t t = b * g; t < (b + 1) * g; ++t) {
      double mn = INFINITY, mx = -INFINITY;
      for (size_t ch = 0; ch < d; ++ch) {
        const double v = c[ch] > 0 ? x[t * d + ch] / c[ch] : 0.0;
        mn = std::min(mn, v), mx = std::max(mx, v);
      }
      const double levels = (1u << (salient(codec, codes, t) ? hi : lo)) - 1.0;
      for (size_t ch = 0; ch < d; ++ch) {
        const size_t i = t * d + ch;
        ASSERT_LE(std::fabs(y[i] - x[i]), c[ch] * 0.5 * (mx - mn) / levels * 1.01 + 1e-3 * std::fabs(x[i]) + 1e-6)
            << (keys ? "keys" : "values") << ", token " << t << ", channel " << ch
            << (salient(codec, codes, t) ? " (salient)" : "");
      }
    }
  }
}

// Exactly the k tokens with the highest attention of each block are salient (ties: lower
// position), whatever their norm; salient tokens decode within half a high-bit step, the others
// within half a low-bit step.
TEST(ZipCache, SalientTokensAreTheTopKByAttention) {
  for (bool keys : {true, false}) {
    for (size_t d : {size_t{128}, size_t{80}, size_t{8}}) {
      for (auto [block, fraction] :
           {std::pair{size_t{64}, 0.6}, std::pair{size_t{32}, 0.25}, std::pair{size_t{12}, 0.5}}) {
        const size_t n = 3 * block;
        const std::vector<float> x = synthetic(n, d, 5 + d, keys), a = random_attention(n, d + block);
        const ZipCacheCodec codec = make(d, block, fraction, keys);
        const size_t k = codec.salient_count();
        ASSERT_EQ(k, static_cast<size_t>(std::llround(fraction * static_cast<double>(block))));
        const std::vector<uint8_t> codes = encoded(codec, x, n, a.data());
        const std::vector<bool> expected = top_k(std::vector<double>(a.begin(), a.end()), block, k);
        ASSERT_NE(expected, top_k(norms(x, d), block, k)) << "attention and norm must disagree for this test";
        for (size_t t = 0; t < n; ++t) {
          ASSERT_EQ(salient(codec, codes, t), expected[t])
              << "token " << t << ", head_dim " << d << ", block " << block;
        }
        expect_within_token_bounds(codec, codes, x, n, keys, 4, 2);
      }
    }
  }
}

// Equal attention everywhere: the first k tokens of every block are the salient ones.
TEST(ZipCache, TiesGoToTheLowerPosition) {
  const size_t d = 16, block = 32, n = 3 * block;
  for (bool keys : {true, false}) {
    const std::vector<float> x = synthetic(n, d, 41, keys), a(n, 0.25f);
    const ZipCacheCodec codec = make(d, block, 0.25, keys);
    const std::vector<uint8_t> codes = encoded(codec, x, n, a.data());
    for (size_t t = 0; t < n; ++t) {
      ASSERT_EQ(salient(codec, codes, t), t % block < codec.salient_count()) << "token " << t;
    }
  }
}

// Without attention (encode(), or encode_salient() with nullptr) each token's own L2 norm ranks
// it; with saliency=key_norm the norm ranks even when attention is given.
TEST(ZipCache, TheNormRanksWithoutAttention) {
  const size_t d = 128, block = 64, n = 4 * block;
  for (bool keys : {true, false}) {
    const std::vector<float> x = synthetic(n, d, 17, keys), a = random_attention(n, 3);
    const ZipCacheCodec codec = make(d, block, 0.25, keys);
    const std::vector<bool> expected = top_k(norms(x, d), block, codec.salient_count());
    std::vector<uint8_t> plain(codec.code_bytes(n));
    codec.encode(x.data(), n, plain.data());
    EXPECT_EQ(plain, encoded(codec, x, n, nullptr));
    const ZipCacheCodec by_norm = make(d, block, 0.25, keys, 4, 2, Saliency::Norm);
    EXPECT_TRUE(by_norm.wants_attention());  // held for attention all the same (same protocol)
    EXPECT_TRUE(codec.wants_attention());
    const std::vector<uint8_t> ignoring = encoded(by_norm, x, n, a.data());
    EXPECT_EQ(plain, ignoring);
    for (size_t t = 0; t < n; ++t) ASSERT_EQ(salient(codec, plain, t), expected[t]) << "token " << t;
    // Keys: the attention sink (token 0, the largest key) is salient.
    if (keys) {
      EXPECT_TRUE(salient(codec, plain, 0));
    }
  }
}

// hi_fraction 1 stores every token at hi_bits, exactly as hi_fraction 0 stores them at the same
// number of low bits; in between, more high-bit tokens, less error.
TEST(ZipCache, FractionOneIsAllHighAndZeroAllLow) {
  for (bool keys : {true, false}) {
    for (size_t d : {size_t{128}, size_t{8}}) {
      const size_t block = 32, n = 4 * block;
      const std::vector<float> x = synthetic(n, d, 23, keys), a = random_attention(n, 9);
      const ZipCacheCodec all_high = make(d, block, 1.0, keys, 4, 2), all_low = make(d, block, 0.0, keys, 8, 4);
      const std::vector<uint8_t> ch = encoded(all_high, x, n, a.data()), cl = encoded(all_low, x, n, a.data());
      for (size_t t = 0; t < n; ++t) ASSERT_TRUE(salient(all_high, ch, t) && !salient(all_low, cl, t));
      std::vector<float> yh(x.size()), yl(x.size());
      all_high.decode(ch.data(), n, yh.data());
      all_low.decode(cl.data(), n, yl.data());
      EXPECT_EQ(0, std::memcmp(yh.data(), yl.data(), yh.size() * sizeof(float))) << "head_dim " << d;
      double previous = INFINITY;
      for (double fraction : {0.0, 0.25, 0.5, 0.75, 1.0}) {
        const ZipCacheCodec codec = make(d, block, fraction, keys);
        std::vector<float> y(x.size());
        codec.decode(encoded(codec, x, n, a.data()).data(), n, y.data());
        const double e = sq_error(x, y);
        EXPECT_LT(e, previous) << "hi_fraction " << fraction << (keys ? " keys" : " values");
        previous = e;
      }
    }
  }
}

// On keys with outlier channels, dividing each channel by sqrt(max |x|) before the per-token
// grid (keys) beats the plain per-token grid (the values' quantizer) by far, at either width.
TEST(ZipCache, ChannelSeparableKeysBeatPerTokenKeys) {
  const size_t d = 128, block = 64, n = 512;
  const std::vector<float> x = synthetic(n, d, 11, true);
  for (double fraction : {0.0, 0.6}) {
    const double separable = sq_error(x, round_trip(make(d, block, fraction, true), x, n));
    const double per_token = sq_error(x, round_trip(make(d, block, fraction, false), x, n));
    EXPECT_LT(separable, 0.5 * per_token) << "hi_fraction " << fraction << ": channel-separable " << separable
                                         << ", per-token " << per_token;
  }
}

// code_bytes = blocks x (bitmap + key channel scales + token grids + high codes + low codes).
TEST(ZipCache, CodeBytesMatchTheFormula) {
  struct Case { size_t d, block, k; unsigned hi, lo; };
  for (const Case& c : {Case{128, 64, 38, 4, 2}, Case{128, 32, 0, 4, 2}, Case{80, 64, 64, 8, 3},
                        Case{8, 12, 5, 3, 2}, Case{7, 9, 4, 4, 2}}) {
    for (bool keys : {true, false}) {
      const ZipCacheCodec codec(c.d, c.block, c.k, c.hi, c.lo, keys, Saliency::Attention);
      const size_t bytes = (c.block + 7) / 8 + (keys ? 2 * c.d : 0) + 4 * c.block + (c.k * c.d * c.hi + 7) / 8 +
                           ((c.block - c.k) * c.d * c.lo + 7) / 8;
      EXPECT_EQ(codec.code_bytes(c.block), bytes) << "head_dim " << c.d << ", block " << c.block;
      EXPECT_EQ(codec.code_bytes(5 * c.block), 5 * bytes);
      EXPECT_EQ(codec.state_bytes(), 0u);
    }
  }
  // Defaults at head_dim 128, per 64-token block (38 salient): keys 8 + 256 + 256 + 2432 + 832,
  // values the same without the 256 bytes of channel scales.
  EXPECT_EQ(make(128, 64, 0.6, true).code_bytes(64), 3784u);
  EXPECT_EQ(make(128, 64, 0.6, false).code_bytes(64), 3528u);
}

// Codes from a session file: a bitmap with the wrong number of salient tokens (or a bit beyond
// the block), a negative or non-finite channel scale or token step and an infinite minimum are
// refused with an Error naming block and field.
TEST(ZipCache, CorruptCodesAreRefused) {
  for (bool keys : {true, false}) {
    for (size_t block : {size_t{64}, size_t{12}}) {
      const size_t d = 16, n = 2 * block;
      const std::vector<float> x = synthetic(n, d, 31, keys);
      const ZipCacheCodec codec = make(d, block, 0.5, keys);
      std::vector<uint8_t> good(codec.code_bytes(n));
      codec.encode(x.data(), n, good.data());
      EXPECT_NO_THROW(codec.check_codes(good.data(), n));
      const size_t second = codec.block_bytes();
      auto expect_refused = [&](const std::vector<uint8_t>& bad, const std::string& field) {
        try {
          codec.check_codes(bad.data(), n);
          ADD_FAILURE() << field << " was accepted, block " << block;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("block 1"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find(keys ? "key" : "value"), std::string::npos) << e.what();
        }
      };
      auto flip = [&](std::vector<uint8_t>& b, size_t t) {
        b[second + t / 8] = static_cast<uint8_t>(b[second + t / 8] ^ (1u << (t % 8)));
      };
      std::vector<uint8_t> bad = good;
      size_t clear = 0, set = 0;
      while (salient(codec, good, block + clear)) ++clear;
      while (!salient(codec, good, block + set)) ++set;
      flip(bad, clear);  // one salient token too many
      expect_refused(bad, "saliency bitmap");
      bad = good;
      flip(bad, set);  // one too few
      expect_refused(bad, "saliency bitmap");
      if (block % 8 != 0) {  // the right count, but a bit beyond the block
        bad = good;
        flip(bad, set);
        bad[second + block / 8] = static_cast<uint8_t>(bad[second + block / 8] | 0x80);
        expect_refused(bad, "saliency bitmap");
      }
      auto with_half = [&](size_t offset, uint16_t h) {
        std::vector<uint8_t> b = good;
        std::memcpy(b.data() + second + offset, &h, 2);
        return b;
      };
      if (keys) {
        expect_refused(with_half(codec.channel_scales_offset() + 2 * 2, 0xBC00), "channel scale of channel 2");  // -1
        expect_refused(with_half(codec.channel_scales_offset() + 2 * 2, 0x7C00), "channel scale of channel 2");  // inf
      }
      expect_refused(with_half(codec.grids_offset() + 2 * 3, 0xBC00), "grid of token 3");                // step -1
      expect_refused(with_half(codec.grids_offset() + 2 * 3, 0x7E00), "grid of token 3");                // NaN step
      expect_refused(with_half(codec.grids_offset() + 2 * (block + 4), 0xFC00), "grid of token 4");      // min -inf
    }
  }
}

// In a KVCache: the queries look along channel 0 and 8 tokens of every 32 have their key there
// (norm about 10); the other keys lie along channel 1 with twice the norm. After the step's
// queries have attended (attend_observed) and the step ends (finish_step), exactly the attended
// tokens are salient in the keys and in the values; ranked by key norm instead, none of them is.
TEST(ZipCache, CacheStoresTheAttendedTokensAtHighBits) {
  const size_t d = 16, block = 32, steps = 2, n = steps * block;
  const std::vector<size_t> attended = {3, 7, 10, 15, 20, 22, 27, 30};  // within each block
  Rng rng(8);
  std::vector<float> k(n * d), v(n * d), q(n * d, 0.0f);
  std::vector<bool> chosen(n, false);
  for (size_t t = 0; t < n; ++t) {
    chosen[t] = std::find(attended.begin(), attended.end(), t % block) != attended.end();
    for (size_t c = 0; c < d; ++c) k[t * d + c] = 0.1f * static_cast<float>(rng.normal());
    k[t * d + (chosen[t] ? 0 : 1)] = chosen[t] ? 10.0f : 20.0f;
    for (size_t c = 0; c < d; ++c) v[t * d + c] = static_cast<float>(rng.normal());
    q[t * d] = 3.0f;
  }
  for (const std::string saliency : {"attention", "key_norm"}) {
    KVCache cache("zipcache:block=32,hi_fraction=0.25,residual=0,saliency=" + saliency, LayerShape{1, d, 0, 0});
    std::vector<float> out(block * d);
    for (size_t s = 0; s < steps; ++s) {
      const size_t at = s * block * d;
      cache.append(TensorView::f32(k.data() + at, {block, 1, d}), TensorView::f32(v.data() + at, {block, 1, d}));
      cache.attend_observed(TensorView::f32(q.data() + at, {block, 1, d}), out.data());
      cache.finish_step();
    }
    const ZipCacheCodec key_codec = make(d, block, 0.25, true), value_codec = make(d, block, 0.25, false);
    const CacheStream &keys = cache.key_streams()[0], &values = cache.value_streams()[0];
    ASSERT_EQ(keys.encoded, n);
    ASSERT_EQ(values.encoded, n);
    for (size_t t = 0; t < n; ++t) {
      if (saliency == "attention") {
        ASSERT_EQ(salient(key_codec, keys.codes, t), chosen[t]) << "token " << t;
        ASSERT_EQ(salient(value_codec, values.codes, t), chosen[t]) << "token " << t;
      } else {
        ASSERT_FALSE(salient(key_codec, keys.codes, t) && chosen[t]) << "token " << t;
      }
    }
  }
}

// Bad parameters are SpecErrors naming the parameter.
TEST(ZipCache, BadParametersAreNamed) {
  test::expect_refused_naming("zipcache:hi_bits=2", "hi_bits");
  test::expect_refused_naming("zipcache:hi_bits=9", "hi_bits");
  test::expect_refused_naming("zipcache:lo_bits=1", "lo_bits");
  test::expect_refused_naming("zipcache:lo_bits=4,hi_bits=4", "hi_bits");
  test::expect_refused_naming("zipcache:hi_fraction=1.5", "hi_fraction");
  test::expect_refused_naming("zipcache:hi_fraction=-0.1", "hi_fraction");
  test::expect_refused_naming("zipcache:block=4", "block");
  test::expect_refused_naming("zipcache:saliency=random", "saliency");
  EXPECT_NO_THROW(KVCache("zipcache:hi_bits=8,lo_bits=4,hi_fraction=1,block=12,saliency=key_norm,residual=0", LayerShape{1, 128, 0, 0}));
  EXPECT_NO_THROW(KVCache("zipcache:hi_fraction=0", LayerShape{1, 128, 0, 0}));
}

}  // namespace
}  // namespace veloxquant::zipcache
