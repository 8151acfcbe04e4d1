// KITTY keys (2-bit KV with a dynamic channel-wise precision boost): KIVI's per-channel keys with
// the widest channels of each block at higher precision. Boost 0 is KIVI bit for bit; the boosted
// channels are exactly the widest ones; the error falls well below KIVI 2-bit for a few percent
// more bytes; the byte count, the corrupt-code checks and the parameter checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codecs/kitty/kitty_key_codec.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"
#include "codecs/codec_test_helpers.h"

namespace veloxquant::kitty {
namespace {

using test::round_trip;
using test::sq_error;

// Keys of one head of the synthetic workload (it has outlier channels of large magnitude).
std::vector<float> synthetic_keys(size_t n, size_t d, uint64_t seed) {
  return make_synthetic_kv(n, 1, d, 1, 1, seed).keys;
}

// With no channel boosted KITTY is KIVI's key quantizer: same grids, same decode, bit for bit.
TEST(Kitty, BoostZeroIsExactlyKiviKeys) {
  for (unsigned bits : {2u, 4u}) {
    for (size_t d : {size_t{128}, size_t{80}, size_t{8}}) {
      for (size_t group : {size_t{32}, size_t{64}}) {
        const size_t n = 3 * group;
        const std::vector<float> k = synthetic_keys(n, d, 3 + d);
        const KittyKeyCodec kitty(d, bits, 8, 0, group);
        const kivi::KiviKeyCodec kivi(d, bits, group);
        const std::vector<float> y = round_trip(kitty, k, n), r = round_trip(kivi, k, n);
        EXPECT_EQ(0, std::memcmp(y.data(), r.data(), y.size() * sizeof(float)))
            << bits << " bits, head_dim " << d << ", group " << group;
        // Only the (empty) mask is added to KIVI's grids and codes.
        EXPECT_EQ(kitty.code_bytes(n), kivi.code_bytes(n) + 3 * ((d + 7) / 8));
      }
    }
  }
}

// The mask of every block holds exactly the k channels with the widest range (max - min) over
// the block's tokens; those decode within half a high-bit step, the rest within half a low-bit
// step.
TEST(Kitty, BoostedChannelsAreTheWidest) {
  const size_t d = 128, group = 32, n = 4 * group;
  const std::vector<float> x = synthetic_keys(n, d, 7);
  for (double boost : {0.125, 0.25, 0.5}) {
    const KittyKeyCodec codec(d, 2, 4, boost_channels(boost, d), group);
    const size_t k = codec.boost_count();
    ASSERT_EQ(k, static_cast<size_t>(std::llround(boost * d)));
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(x.data(), n, codes.data());
    std::vector<float> y(x.size());
    codec.decode(codes.data(), n, y.data());
    for (size_t b = 0; b < n / group; ++b) {
      std::vector<float> range(d);
      for (size_t c = 0; c < d; ++c) {
        float lo = INFINITY, hi = -INFINITY;
        for (size_t t = 0; t < group; ++t) lo = std::min(lo, x[(b * group + t) * d + c]), hi = std::max(hi, x[(b * group + t) * d + c]);
        range[c] = hi - lo;
      }
      std::vector<uint32_t> order(d);
      std::iota(order.begin(), order.end(), 0u);
      std::stable_sort(order.begin(), order.end(), [&](uint32_t i, uint32_t j) { return range[i] > range[j]; });
      std::vector<bool> expected(d, false);
      for (size_t i = 0; i < k; ++i) expected[order[i]] = true;
      const uint8_t* mask = codes.data() + b * codec.block_bytes();
      for (size_t c = 0; c < d; ++c) {
        const bool got = ((mask[c / 8] >> (c % 8)) & 1u) != 0;
        ASSERT_EQ(got, expected[c]) << "block " << b << ", channel " << c << ", boost " << boost;
        const double levels = got ? 15.0 : 3.0;
        for (size_t t = 0; t < group; ++t) {
          const size_t i = (b * group + t) * d + c;
          EXPECT_LE(std::fabs(y[i] - x[i]), 0.5 * range[c] / levels * 1.01 + 1e-3 * std::fabs(x[i]) + 1e-6)
              << "block " << b << ", channel " << c;
        }
      }
    }
  }
}

// On keys with outlier channels, boosting 1/8 of the channels to 4 bits cuts KIVI 2-bit's
// squared error by more than half for under 10 % more key bytes.
TEST(Kitty, ErrorWellBelowKiviAtAModestByteIncrease) {
  const size_t d = 128, group = 32, n = 512;
  const std::vector<float> x = synthetic_keys(n, d, 11);
  const KittyKeyCodec kitty(d, 2, 4, boost_channels(0.125, d), group);
  const kivi::KiviKeyCodec kivi(d, 2, group);
  const double ek = sq_error(x, round_trip(kitty, x, n)), ev = sq_error(x, round_trip(kivi, x, n));
  EXPECT_LT(ek, 0.5 * ev) << "kitty " << ek << ", kivi " << ev;
  EXPECT_LT(static_cast<double>(kitty.code_bytes(n)), 1.10 * static_cast<double>(kivi.code_bytes(n)));
  EXPECT_GT(kitty.code_bytes(n), kivi.code_bytes(n));
  // More boost, less error.
  double previous = ev * 1.0000001;
  for (double boost : {0.0, 0.0625, 0.125, 0.25, 0.5}) {
    const double e = sq_error(x, round_trip(KittyKeyCodec(d, 2, 4, boost_channels(boost, d), group), x, n));
    EXPECT_LT(e, previous) << "boost " << boost;
    previous = e;
  }
}

// code_bytes = blocks x (mask + fp16 scale and min per channel + low codes + high codes).
TEST(Kitty, CodeBytesMatchTheFormula) {
  struct Case { size_t d, group; unsigned bits, high; size_t k; };
  for (const Case& c : {Case{128, 32, 2, 4, 16}, Case{128, 64, 2, 8, 64}, Case{80, 32, 2, 4, 10},
                        Case{8, 16, 4, 8, 1}, Case{96, 128, 2, 4, 0}, Case{7, 16, 2, 4, 3}}) {
    const KittyKeyCodec codec(c.d, c.bits, c.high, c.k, c.group);
    const size_t block = (c.d + 7) / 8 + 4 * c.d + (c.group * (c.d - c.k) * c.bits + 7) / 8 +
                         (c.group * c.k * c.high + 7) / 8;
    EXPECT_EQ(codec.code_bytes(c.group), block) << "head_dim " << c.d;
    EXPECT_EQ(codec.code_bytes(5 * c.group), 5 * block);
    EXPECT_EQ(codec.state_bytes(), 0u);
  }
  // Defaults at head_dim 128, per 32-token block: 16 + 512 + 896 + 256 bytes (KIVI: 1536).
  EXPECT_EQ(KittyKeyCodec(128, 2, 4, boost_channels(0.125, 128), 32).code_bytes(32), 1680u);
}

// The fused scores (codes against the scale-folded query, split by the block's mask) are the
// decoded keys' inner products, for every layout: no channel boosted, odd widths, half boosted.
TEST(Kitty, FusedScoresEqualTheDecodedKeysProducts) {
  struct Case {
    size_t d, group;
    unsigned bits, high;
    size_t k;
  };
  for (const Case& c : {Case{128, 32, 2, 4, 16}, Case{128, 64, 2, 8, 64}, Case{80, 32, 3, 5, 10},
                        Case{8, 16, 4, 8, 1}, Case{96, 32, 2, 4, 0}, Case{7, 16, 1, 4, 3}}) {
    const KittyKeyCodec codec(c.d, c.bits, c.high, c.k, c.group);
    const size_t n = 3 * c.group, nq = 3;
    const std::vector<float> k = synthetic_keys(n, c.d, 11 + c.d);
    const std::vector<float> q = synthetic_keys(nq, c.d, 29 + c.d);
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(k.data(), n, codes.data());
    std::vector<float> decoded(n * c.d), fused(nq * n);
    codec.decode(codes.data(), n, decoded.data());
    codec.score(q.data(), nq, codes.data(), n, fused.data());
    ASSERT_TRUE(codec.fused_score());
    for (size_t i = 0; i < nq; ++i)
      for (size_t t = 0; t < n; ++t) {
        double want = 0, magnitude = 0;
        for (size_t ch = 0; ch < c.d; ++ch) {
          want += double(q[i * c.d + ch]) * decoded[t * c.d + ch];
          magnitude += std::fabs(double(q[i * c.d + ch]) * decoded[t * c.d + ch]);
        }
        ASSERT_NEAR(fused[i * n + t], want, 1e-5 * magnitude + 1e-6)
            << "head_dim " << c.d << ", " << c.k << " boosted, query " << i << ", token " << t;
      }
  }
}

// Codes from a session file: a mask with the wrong number of boosted channels (or a bit beyond
// head_dim) and a non-finite or negative grid are refused with an Error naming block and field.
TEST(Kitty, CorruptCodesAreRefused) {
  for (size_t d : {size_t{128}, size_t{12}}) {
    const size_t group = 32, n = 64;
    const std::vector<float> x = synthetic_keys(n, d, 31);
    const KittyKeyCodec codec(d, 2, 4, boost_channels(0.125, d), group);
    std::vector<uint8_t> good(codec.code_bytes(n));
    codec.encode(x.data(), n, good.data());
    EXPECT_NO_THROW(codec.check_codes(good.data(), n));
    const size_t second = codec.block_bytes();
    auto expect_refused = [&](const std::vector<uint8_t>& bad, const std::string& field) {
      try {
        codec.check_codes(bad.data(), n);
        ADD_FAILURE() << field << " was accepted, head_dim " << d;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("block 1"), std::string::npos) << e.what();
      }
    };
    // One boosted channel too many: set the first clear bit.
    std::vector<uint8_t> bad = good;
    for (size_t c = 0; c < d; ++c)
      if (((bad[second + c / 8] >> (c % 8)) & 1u) == 0) {
        bad[second + c / 8] = static_cast<uint8_t>(bad[second + c / 8] | (1u << (c % 8)));
        break;
      }
    expect_refused(bad, "channel mask");
    bad = good;  // one too few
    std::fill(bad.begin() + static_cast<std::ptrdiff_t>(second),
              bad.begin() + static_cast<std::ptrdiff_t>(second + codec.mask_bytes()), uint8_t{0});
    expect_refused(bad, "channel mask");
    if (d % 8 != 0) {  // right count, but a boosted bit beyond head_dim
      bad = good;
      for (size_t c = 0; c < d; ++c)
        if ((bad[second + c / 8] >> (c % 8)) & 1u) {
          bad[second + c / 8] = static_cast<uint8_t>(bad[second + c / 8] & ~(1u << (c % 8)));
          break;
        }
      bad[second + d / 8] = static_cast<uint8_t>(bad[second + d / 8] | (1u << 7));
      expect_refused(bad, "channel mask");
    }
    auto with_half = [&](size_t offset, uint16_t h) {
      std::vector<uint8_t> b = good;
      std::memcpy(b.data() + second + offset, &h, 2);
      return b;
    };
    expect_refused(with_half(codec.grids_offset() + 2 * 2, 0xBC00), "grid of channel 2");        // step -1
    expect_refused(with_half(codec.grids_offset() + 2 * 2, 0x7E00), "grid of channel 2");        // NaN step
    expect_refused(with_half(codec.grids_offset() + 2 * (d + 3), 0xFC00), "grid of channel 3");  // min -inf
  }
}

// Bad parameters are SpecErrors naming the parameter.
TEST(Kitty, BadParametersAreNamed) {
  test::expect_refused_naming("kitty:bits=3", "bits");
  test::expect_refused_naming("kitty:bits=1", "bits");
  test::expect_refused_naming("kitty:high_bits=2", "high_bits");
  test::expect_refused_naming("kitty:high_bits=6", "high_bits");
  test::expect_refused_naming("kitty:bits=4,high_bits=4", "high_bits");
  test::expect_refused_naming("kitty:boost=0.6", "boost");
  test::expect_refused_naming("kitty:boost=-0.1", "boost");
  test::expect_refused_naming("kitty:group=24", "group");
  test::expect_refused_naming("kitty:vbits=3", "vbits");
  EXPECT_NO_THROW(KVCache("kitty:bits=4,high_bits=8,boost=0.5,group=64,vbits=4,residual=0", LayerShape{1, 128, 0, 0}));
  EXPECT_NO_THROW(KVCache("kitty:boost=0", LayerShape{1, 128, 0, 0}));
}

// In the cache: keys closer to the input than KIVI 2-bit's (same values codec, same window).
TEST(Kitty, CacheKeyErrorBelowKivi) {
  const size_t tokens = 512, heads = 2, d = 128;
  const SyntheticKV w = make_synthetic_kv(tokens, heads, d, 2, 1, 5);
  auto errors = [&](const std::string& spec) { return test::cache_errors(spec, w); };
  const auto [tk, tv] = errors("kitty");
  const auto [kk, kv] = errors("kivi");
  EXPECT_LT(tk, 0.5 * kk);
  EXPECT_EQ(tv, kv);  // the values are KIVI's
}

}  // namespace
}  // namespace veloxquant::kitty
