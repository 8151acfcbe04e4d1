// xquant (XQuant's cross-layer code sharing on KIVI): the leader stores KIVI's blocks unchanged,
// the follower decodes from the leader's codes with its own grids (its min/max grids as the
// paper, or the least-squares fit), the data-free calibration, a pair of identical layers
// reproduces itself, the bits per element of a pair, and corrupt follower grids.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/xquant/xquant_pair_codec.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::xquant {
namespace {

using test::sq_error;

std::unique_ptr<GridCodec> kivi_codec(bool keys, size_t d, unsigned bits, size_t group) {
  if (keys) return std::make_unique<kivi::KiviKeyCodec>(d, bits, group);
  return std::make_unique<kivi::KiviValueCodec>(d, bits, group);
}

// A follower correlated with the leader, as adjacent layers are: a scaled, shifted copy plus noise.
std::vector<float> follower_of(const std::vector<float>& leader, uint64_t seed) {
  const std::vector<float> noise = test::gaussian(leader.size(), seed, 0.3);
  std::vector<float> f(leader.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.7f * leader[i] + 0.2f + noise[i];
  return f;
}

struct Encoded {
  std::vector<uint8_t> leader, follower;
};

Encoded encode(const XQuantPairCodec& codec, const std::vector<float>& a, const std::vector<float>& b, size_t n) {
  Encoded e{std::vector<uint8_t>(codec.leader_bytes(n)), std::vector<uint8_t>(codec.follower_bytes(n))};
  codec.encode(a.data(), b.data(), n, e.leader.data(), e.follower.data());
  return e;
}

TEST(XQuant, TheLeaderIsKiviAndTheFollowerDecodesFromItsCodesWithItsOwnGrids) {
  for (const FollowerGrid mode : {FollowerGrid::MinMax, FollowerGrid::LeastSquares}) {
    for (const bool keys : {true, false}) {
      for (size_t d : {size_t{128}, size_t{80}}) {
        SCOPED_TRACE(std::string(keys ? "keys" : "values") + ", head_dim " + std::to_string(d) +
                     (mode == FollowerGrid::MinMax ? ", min/max" : ", least squares"));
        const size_t group = 32, n = 4 * group;
        const XQuantPairCodec codec(kivi_codec(keys, d, 2, group), mode, 0.0);
        const GridCodec& kivi = codec.base();
        const std::vector<float> a = test::gaussian(n * d, d + keys), b = follower_of(a, 7);
        const Encoded e = encode(codec, a, b, n);
        std::vector<uint8_t> by_kivi(kivi.code_bytes(n));
        kivi.encode(a.data(), n, by_kivi.data());
        EXPECT_EQ(e.leader, by_kivi);
        // The follower stores 4 bytes per grid and nothing else.
        EXPECT_EQ(codec.follower_bytes(n), n / kivi.block_tokens() * 4 * kivi.grids());
        const std::vector<float> lead = decode_pair_layer(codec, false, e.leader.data(), e.follower.data(), n);
        const std::vector<float> next = decode_pair_layer(codec, true, e.leader.data(), e.follower.data(), n);
        EXPECT_EQ(lead, test::round_trip(kivi, a, n));
        // Every follower element is min + step * (the leader's code), with the follower's grid.
        const size_t bt = kivi.block_tokens(), grids = kivi.grids();
        std::vector<uint8_t> q(bt * d);
        for (size_t blk = 0; blk < n / bt; ++blk) {
          kivi.unpack_codes(e.leader.data() + blk * kivi.block_bytes(), q.data());
          std::vector<uint16_t> g(2 * grids);
          std::memcpy(g.data(), e.follower.data() + blk * 4 * grids, 4 * grids);
          for (size_t t = 0; t < bt; ++t)
            for (size_t c = 0; c < d; ++c) {
              const size_t k = kivi.grid_of(t, c);
              const float want = f16_to_f32(g[grids + k]) + f16_to_f32(g[k]) * static_cast<float>(q[t * d + c]);
              ASSERT_EQ(next[(blk * bt + t) * d + c], want) << blk << "," << t << "," << c;
            }
        }
        // Sharing costs the follower accuracy (its values are not what the codes were chosen for),
        // but keeps it well below the spread of its values; least squares does better than min/max.
        double spread = 0;
        for (float x : b) spread += (x - 0.2) * (x - 0.2);
        EXPECT_LT(sq_error(b, next), (mode == FollowerGrid::MinMax ? 0.7 : 0.35) * spread);
        if (mode == FollowerGrid::MinMax) {
          // The paper's follower grids are KIVI's min/max grids of its own values.
          std::vector<uint8_t> own(kivi.code_bytes(n));
          kivi.encode(b.data(), n, own.data());
          for (size_t blk = 0; blk < n / bt; ++blk) {
            ASSERT_EQ(0, std::memcmp(own.data() + blk * kivi.block_bytes() + kivi.grids_at(),
                                     e.follower.data() + blk * 4 * grids, 4 * grids)) << blk;
          }
        }
      }
    }
  }
}

TEST(XQuant, TheFollowersGridIsTheLeastSquaresLine) {
  // x = 1.5 + 0.25 q exactly: the fit recovers it (both fp16-exact).
  const std::vector<double> q = {0, 1, 2, 3, 3, 1}, x = {1.5, 1.75, 2.0, 2.25, 2.25, 1.75};
  auto fit = [](const std::vector<double>& qs, const std::vector<double>& xs) {
    double n = 0, sq = 0, sx = 0, sqq = 0, sqx = 0;
    for (size_t i = 0; i < qs.size(); ++i) n += 1, sq += qs[i], sx += xs[i], sqq += qs[i] * qs[i], sqx += qs[i] * xs[i];
    uint16_t step, min;
    fit_follower_grid(n, sq, sx, sqq, sqx, step, min);
    return std::pair{f16_to_f32(step), f16_to_f32(min)};
  };
  EXPECT_EQ(fit(q, x), (std::pair{0.25f, 1.5f}));
  // Noisy: no other (step, min) near the fit does better (fp16 rounding aside).
  const std::vector<double> noisy = {1.0, 2.9, 2.2, 4.1, 3.8, 1.9};
  const auto [step, min] = fit(q, noisy);
  auto err = [&](double s, double m) {
    double e = 0;
    for (size_t i = 0; i < q.size(); ++i) e += std::pow(m + s * q[i] - noisy[i], 2);
    return e;
  };
  for (double ds : {-0.05, 0.05})
    for (double dm : {-0.05, 0.0, 0.05}) EXPECT_LT(err(step, min), err(step + ds, min + dm)) << ds << "," << dm;
  // Values falling as the codes rise: KIVI's kernels need steps >= 0, so the mean alone.
  const std::vector<double> falling = {3.0, 2.0, 1.0, 0.0, 0.0, 2.0};
  EXPECT_EQ(fit(q, falling), (std::pair{0.0f, f16_to_f32(f32_to_f16(8.0f / 6))}));
  // Constant codes: no slope to fit.
  EXPECT_EQ(fit({2, 2, 2}, {1, 2, 3}), (std::pair{0.0f, 2.0f}));
}

// Two identical layers: with the paper's min/max grids (calibrated or not) the follower decodes
// exactly as the leader; least-squares grids fit it at least as well as the leader's fit the leader.
TEST(XQuant, IdenticalLayersReproduceEachOther) {
  for (const bool keys : {true, false}) {
    const size_t d = 128, group = 32, n = 8 * group;
    const std::vector<float> a = test::gaussian(n * d, 31 + keys);
    for (const double eta : {0.0, 0.1}) {
      const XQuantPairCodec codec(kivi_codec(keys, d, 2, group), FollowerGrid::MinMax, eta);
      const Encoded e = encode(codec, a, a, n);
      EXPECT_EQ(decode_pair_layer(codec, false, e.leader.data(), e.follower.data(), n),
                decode_pair_layer(codec, true, e.leader.data(), e.follower.data(), n)) << eta;
    }
    const XQuantPairCodec codec(kivi_codec(keys, d, 2, group), FollowerGrid::LeastSquares, 0.0);
    const Encoded e = encode(codec, a, a, n);
    const std::vector<float> lead = decode_pair_layer(codec, false, e.leader.data(), e.follower.data(), n);
    const std::vector<float> next = decode_pair_layer(codec, true, e.leader.data(), e.follower.data(), n);
    const double leader_err = sq_error(a, lead), follower_err = sq_error(a, next);
    EXPECT_LE(follower_err, leader_err) << (keys ? "keys" : "values");
    EXPECT_GT(follower_err, 0.5 * leader_err) << "the same codes cannot do much better";
  }
}

// The data-free calibration narrows a grid by eta of its range at both ends:
// step' = (1 - 2 eta) step, min' = min + eta step (2^bits - 1); the leader's codes stay KIVI's.
TEST(XQuant, DataFreeCalibrationNarrowsTheGrids) {
  uint16_t step = f32_to_f16(0.5f), min = f32_to_f16(-1.0f);
  calibrate_grid(step, min, 3, 0.0);
  EXPECT_EQ(f16_to_f32(step), 0.5f);
  EXPECT_EQ(f16_to_f32(min), -1.0f);
  calibrate_grid(step, min, 3, 0.125);
  EXPECT_EQ(f16_to_f32(step), 0.375f);    // (1 - 0.25) * 0.5
  EXPECT_EQ(f16_to_f32(min), -0.8125f);  // -1 + 0.125 * 0.5 * 3
  const size_t d = 64, group = 32;
  const std::vector<float> a = test::gaussian(group * d, 61), b = follower_of(a, 62);
  const XQuantPairCodec plain(kivi_codec(true, d, 2, group), FollowerGrid::MinMax, 0.0);
  const XQuantPairCodec calibrated(kivi_codec(true, d, 2, group), FollowerGrid::MinMax, 0.2);
  const Encoded p = encode(plain, a, b, group), c = encode(calibrated, a, b, group);
  const GridCodec& kivi = plain.base();
  std::vector<uint8_t> qp(group * d), qc(group * d);
  kivi.unpack_codes(p.leader.data(), qp.data());
  kivi.unpack_codes(c.leader.data(), qc.data());
  EXPECT_EQ(qp, qc);
  for (const auto* codes : {&p.leader, &p.follower}) {
    const bool follower = codes == &p.follower;
    const uint8_t* grids_p = follower ? p.follower.data() : p.leader.data() + kivi.grids_at();
    const uint8_t* grids_c = follower ? c.follower.data() : c.leader.data() + kivi.grids_at();
    for (size_t g = 0; g < kivi.grids(); ++g) {
      uint16_t s, m, sc, mc;
      std::memcpy(&s, grids_p + 2 * g, 2);
      std::memcpy(&m, grids_p + 2 * (kivi.grids() + g), 2);
      std::memcpy(&sc, grids_c + 2 * g, 2);
      std::memcpy(&mc, grids_c + 2 * (kivi.grids() + g), 2);
      calibrate_grid(s, m, 3, 0.2);
      ASSERT_EQ(s, sc) << follower << " " << g;
      ASSERT_EQ(m, mc) << follower << " " << g;
    }
  }
}

TEST(XQuant, APairAveragesBelowOneAndAHalfBitsPerElement) {
  const size_t heads = 2, d = 128, tokens = 1024, layers = 2;
  const std::vector<float> k = test::gaussian(tokens * heads * d, 41), v = test::gaussian(tokens * heads * d, 42);
  std::vector<KVCache> caches = make_layer_caches(parse_spec("xquant:residual=0"), LayerShape{heads, d, 0, 0}, layers);
  for (KVCache& c : caches) {
    c.append(TensorView::f32(k.data(), {tokens, heads, d}), TensorView::f32(v.data(), {tokens, heads, d}));
  }
  for (KVCache& c : caches) c.finish_step();
  const size_t bytes = caches[0].bytes() + caches[1].bytes();
  // Per 128-token key group and per 4-token value block: 2-bit codes once, fp16 grids per layer.
  const size_t key_leader = 4 * d + 128 * d * 2 / 8, key_follower = 4 * d;
  const size_t value_leader = 4 * d * 2 / 8 + 16, value_follower = 16;
  EXPECT_EQ(caches[0].bytes(), heads * (tokens / 128 * key_leader + tokens / 4 * value_leader));
  EXPECT_EQ(caches[1].bytes(), heads * (tokens / 128 * key_follower + tokens / 4 * value_follower));
  const double bits = 8.0 * static_cast<double>(bytes) / static_cast<double>(layers * 2 * tokens * heads * d);
  EXPECT_DOUBLE_EQ(bits, 1.25);
  EXPECT_LT(bits, 1.5);
}

TEST(XQuant, CorruptFollowerGridsAreRefused) {
  const size_t d = 64, group = 32;
  const XQuantPairCodec codec(kivi_codec(true, d, 2, group), FollowerGrid::MinMax, 0.0);
  const std::vector<float> a = test::gaussian(group * d, 51), b = follower_of(a, 52);
  Encoded e = encode(codec, a, b, group);
  EXPECT_NO_THROW(codec.check_codes(true, e.follower.data(), group));
  EXPECT_NO_THROW(codec.check_codes(false, e.leader.data(), group));
  const uint16_t nan = 0x7E00, negative = f32_to_f16(-1.0f);
  std::memcpy(e.follower.data() + 2 * 5, &negative, 2);  // the step of channel 5
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec.check_codes(true, e.follower.data(), group); }),
                  "corrupt follower grid codes: block 0, parameter 5");
  std::memcpy(e.leader.data() + 2 * 3, &nan, 2);
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec.check_codes(false, e.leader.data(), group); }),
                  "corrupt key codes: block 0, parameter 3");
}

TEST(XQuant, BadParametersAreNamed) {
  test::expect_refused_naming("xquant:kbits=3", "kbits");
  test::expect_refused_naming("xquant:group=40", "group");
  EXPECT_THROW(parse_spec("xquant:vbits=9"), SpecError);
  EXPECT_THROW(parse_spec("xquant:eta=0.5"), SpecError);
  EXPECT_THROW(parse_spec("xquant:follower=mean"), SpecError);
}

}  // namespace
}  // namespace veloxquant::xquant
