// minicache (MiniCache's cross-layer merge): SLERP of directions, magnitudes restored exactly, a
// merged token's error bounded by its angle, the most divergent tokens retained and decoded
// exactly, layers before `start` stored by the base quantizer unchanged, byte counts, corrupt codes.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <numbers>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/minicache/minicache_pair_codec.h"
#include "codecs/minicache/slerp.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::minicache {
namespace {

double norm(const float* x, size_t d) {
  double s = 0;
  for (size_t c = 0; c < d; ++c) s += static_cast<double>(x[c]) * x[c];
  return std::sqrt(s);
}

std::vector<float> unit(std::vector<float> x) {
  const double n = norm(x.data(), x.size());
  for (float& v : x) v = static_cast<float>(v / n);
  return x;
}

std::unique_ptr<Codec> kivi_codec(bool keys, size_t d, unsigned bits, size_t group) {
  if (keys) return std::make_unique<kivi::KiviKeyCodec>(d, bits, group);
  return std::make_unique<kivi::KiviValueCodec>(d, bits, group);
}

// Two layers whose tokens differ by varying angles: the follower is the leader turned toward an
// independent vector by a token-dependent amount, at another magnitude.
std::pair<std::vector<float>, std::vector<float>> two_layers(size_t n, size_t d, uint64_t seed) {
  const std::vector<float> a = test::gaussian(n * d, seed), other = test::gaussian(n * d, seed + 1);
  std::vector<float> b(n * d);
  for (size_t t = 0; t < n; ++t) {
    const float mix = static_cast<float>(t % 7) / 10.0f, scale = 0.5f + static_cast<float>(t % 3);
    for (size_t c = 0; c < d; ++c) b[t * d + c] = scale * ((1 - mix) * a[t * d + c] + mix * other[t * d + c]);
  }
  return {a, b};
}

struct Pair {
  std::vector<uint8_t> leader, follower;
  std::vector<float> lead, next;  // decoded
};

Pair run(const MiniCachePairCodec& codec, const std::vector<float>& a, const std::vector<float>& b, size_t n) {
  Pair p{std::vector<uint8_t>(codec.leader_bytes(n)), std::vector<uint8_t>(codec.follower_bytes(n)), {}, {}};
  codec.encode(a.data(), b.data(), n, p.leader.data(), p.follower.data());
  p.lead = decode_pair_layer(codec, false, p.leader.data(), p.follower.data(), n);
  p.next = decode_pair_layer(codec, true, p.leader.data(), p.follower.data(), n);
  return p;
}

TEST(MiniCache, SlerpOfIdenticalDirectionsIsThatDirection) {
  const size_t d = 64;
  const std::vector<float> u = unit(test::gaussian(d, 1)), v = unit(test::gaussian(d, 2));
  std::vector<float> out(d);
  for (double t : {0.0, 0.3, 0.6, 1.0}) {
    slerp(u.data(), u.data(), d, angle_between(u.data(), u.data(), d), t, out.data());
    for (size_t c = 0; c < d; ++c) ASSERT_NEAR(out[c], u[c], 1e-6) << t;
  }
  const double omega = angle_between(u.data(), v.data(), d);
  ASSERT_GT(omega, 1.0);  // independent Gaussian directions in 64 dims are nearly orthogonal
  for (double t : {0.0, 0.25, 0.6, 1.0}) {
    slerp(u.data(), v.data(), d, omega, t, out.data());
    EXPECT_NEAR(norm(out.data(), d), 1.0, 1e-6);
    // On the great circle: t of the way from u to v.
    EXPECT_NEAR(angle_between(out.data(), u.data(), d), t * omega, 1e-5) << t;
    EXPECT_NEAR(angle_between(out.data(), v.data(), d), (1 - t) * omega, 1e-5) << t;
  }
  // Exact opposites at t = 1/2 have no great circle to follow: the leader's direction.
  std::vector<float> minus(d);
  for (size_t c = 0; c < d; ++c) minus[c] = -u[c];
  slerp(u.data(), minus.data(), d, angle_between(u.data(), minus.data(), d), 0.5, out.data());
  for (size_t c = 0; c < d; ++c) ASSERT_NEAR(out[c], u[c], 1e-6);
}

TEST(MiniCache, MagnitudesRestoreExactly) {
  for (const bool keys : {true, false}) {
    const size_t d = 128, group = 32, n = 4 * group;
    const MiniCachePairCodec codec(kivi_codec(keys, d, 4, group), group, 2, 0.6);
    const auto [a, b] = two_layers(n, d, 3 + keys);
    const Pair p = run(codec, a, b, n);
    size_t merged = 0;
    for (size_t t = 0; t < n; ++t) {
      // The retained tokens are their fp16 rows (the next test); every other one is merged.
      const std::vector<size_t> kept = codec.retained_tokens(p.leader.data(), t / group);
      if (std::find(kept.begin(), kept.end(), t % group) != kept.end()) continue;
      ++merged;
      EXPECT_NEAR(norm(p.lead.data() + t * d, d), norm(a.data() + t * d, d), 2e-6 * norm(a.data() + t * d, d)) << t;
      EXPECT_NEAR(norm(p.next.data() + t * d, d), norm(b.data() + t * d, d), 2e-6 * norm(b.data() + t * d, d)) << t;
    }
    EXPECT_EQ(merged, n - n / group * 2);
  }
}

// A merged token keeps its magnitude and takes the shared direction, t * angle away from the
// leader's own and (1 - t) * angle from the follower's: its error is 2 |x| sin(t angle / 2) (the
// chord), plus what the base quantizer adds (8 bits here, so little). The retained tokens are the
// most divergent of their group and decode exactly (their fp16 rows).
TEST(MiniCache, MergedErrorFollowsTheAngleAndTheMostDivergentAreRetainedExactly) {
  const size_t d = 128, group = 32, n = 4 * group, retained = 3;
  const double t = 0.6;
  const MiniCachePairCodec codec(kivi_codec(true, d, 8, group), group, retained, t);
  const auto [a, b] = two_layers(n, d, 5);
  const Pair p = run(codec, a, b, n);
  for (size_t blk = 0; blk < n / group; ++blk) {
    const std::vector<size_t> kept = codec.retained_tokens(p.leader.data(), blk);
    ASSERT_EQ(kept.size(), retained);
    double smallest_kept = 10, largest_merged = 0;
    for (size_t i = blk * group; i < (blk + 1) * group; ++i) {
      const double angle = angle_between(a.data() + i * d, b.data() + i * d, d);
      const bool is_kept = std::find(kept.begin(), kept.end(), i - blk * group) != kept.end();
      if (is_kept) {
        smallest_kept = std::min(smallest_kept, angle);
        for (size_t c = 0; c < d; ++c) {
          ASSERT_EQ(p.lead[i * d + c], f16_to_f32(f32_to_f16(a[i * d + c])));
          ASSERT_EQ(p.next[i * d + c], f16_to_f32(f32_to_f16(b[i * d + c])));
        }
        continue;
      }
      largest_merged = std::max(largest_merged, angle);
      const double na = norm(a.data() + i * d, d), nb = norm(b.data() + i * d, d);
      std::vector<float> ea(d), eb(d);
      for (size_t c = 0; c < d; ++c) ea[c] = p.lead[i * d + c] - a[i * d + c], eb[c] = p.next[i * d + c] - b[i * d + c];
      EXPECT_NEAR(norm(ea.data(), d), 2 * na * std::sin(t * angle / 2), 0.02 * na) << i;
      EXPECT_NEAR(norm(eb.data(), d), 2 * nb * std::sin((1 - t) * angle / 2), 0.02 * nb) << i;
    }
    EXPECT_GE(smallest_kept, largest_merged) << "block " << blk;
  }
}

// Identical layers have nothing to merge away: both decode to the base quantizer's reading of the
// direction at their own (equal) magnitude.
TEST(MiniCache, IdenticalLayersDecodeAlike) {
  const size_t d = 64, group = 32, n = 2 * group;
  const MiniCachePairCodec codec(kivi_codec(false, d, 4, group), group, 2, 0.6);
  const std::vector<float> a = test::gaussian(n * d, 9);
  const Pair p = run(codec, a, a, n);
  EXPECT_EQ(p.lead, p.next);
  EXPECT_LT(test::sq_error(a, p.lead), 0.02 * test::sq_error(a, std::vector<float>(a.size(), 0.0f)));
}

TEST(MiniCache, BytesPerGroup) {
  // Leader: KIVI's 4-bit key block, f32 magnitudes, u16 indices and fp16 rows of the retained.
  const MiniCachePairCodec codec(kivi_codec(true, 128, 4, 32), 32, 2, 0.6);
  EXPECT_EQ(codec.leader_bytes(32), (4 * 128 + 32 * 128 * 4 / 8) + 4 * 32 + 2 * 2 + 2 * 2 * 128);
  EXPECT_EQ(codec.follower_bytes(32), 4 * 32 + 2 * 2 * 128u);
  EXPECT_EQ(codec.leader_bytes(96), 3 * codec.leader_bytes(32));
  // The method: retain=0.05 of 32 tokens rounds up to 2.
  const Spec spec = parse_spec("minicache");
  const PairCodecs pair = spec.method->make_pair(spec.params, LayerShape{1, 128, 0, 0, 2});
  EXPECT_EQ(pair.key->leader_bytes(32), codec.leader_bytes(32));
  EXPECT_EQ(pair.value->follower_bytes(32), codec.follower_bytes(32));
}

// The layers before `start` are stored by KIVI alone, byte for byte; the merged ones from there.
TEST(MiniCache, LayersBeforeStartAreTheBaseQuantizer) {
  const size_t heads = 2, d = 128, tokens = 400, layers = 4;
  std::vector<KVCache> caches = make_layer_caches(parse_spec("minicache"), LayerShape{heads, d, 0, 0}, layers);
  std::vector<KVCache> kivi = make_layer_caches(parse_spec("kivi:kbits=4,vbits=4"), LayerShape{heads, d, 0, 0}, layers);
  for (size_t l = 0; l < layers; ++l) {
    const std::vector<float> k = test::gaussian(tokens * heads * d, 60 + l), v = test::gaussian(tokens * heads * d, 70 + l);
    for (auto* set : {&caches, &kivi})
      (*set)[l].append(TensorView::f32(k.data(), {tokens, heads, d}), TensorView::f32(v.data(), {tokens, heads, d}));
  }
  for (size_t l = 0; l < layers; ++l) {
    caches[l].finish_step();
    kivi[l].finish_step();
  }
  for (size_t l = 0; l < layers; ++l) {
    for (size_t h = 0; h < heads; ++h) {
      const bool same = caches[l].key_streams()[h].codes == kivi[l].key_streams()[h].codes &&
                        caches[l].value_streams()[h].codes == kivi[l].value_streams()[h].codes;
      EXPECT_EQ(same, l < 2) << "layer " << l << ", head " << h;
      EXPECT_EQ(caches[l].key_streams()[h].tail, kivi[l].key_streams()[h].tail);
    }
  }
  EXPECT_EQ(caches[0].bytes(), kivi[0].bytes());
  // The merged pair stores less than KIVI's two layers, shared directions counted once.
  EXPECT_LT(caches[2].bytes() + caches[3].bytes(), kivi[2].bytes() + kivi[3].bytes());
  EXPECT_GT(caches[2].bytes(), caches[3].bytes());
}

TEST(MiniCache, CorruptCodesAreRefused) {
  const size_t d = 16, group = 16;
  const MiniCachePairCodec codec(kivi_codec(true, d, 4, group), group, 2, 0.6);
  const auto [a, b] = two_layers(group, d, 11);
  const Pair p = run(codec, a, b, group);
  EXPECT_NO_THROW(codec.check_codes(false, p.leader.data(), group));
  EXPECT_NO_THROW(codec.check_codes(true, p.follower.data(), group));
  const size_t kivi_bytes = kivi::KiviKeyCodec(d, 4, group).code_bytes(group);
  auto spoiled = [&](bool follower, size_t at, const void* value, size_t size) {
    std::vector<uint8_t> c = follower ? p.follower : p.leader;
    std::memcpy(c.data() + at, value, size);
    return test::error_message<Error>([&] { codec.check_codes(follower, c.data(), group); });
  };
  const float negative = -1.0f;
  EXPECT_CONTAINS(spoiled(false, kivi_bytes + 4 * 3, &negative, 4),
                  "minicache: corrupt leader codes: block 0, token 3 has magnitude -1");
  EXPECT_CONTAINS(spoiled(true, 4 * 5, &negative, 4), "corrupt follower codes: block 0, token 5 has magnitude");
  const uint16_t index = 16, nan = 0x7E00;
  EXPECT_CONTAINS(spoiled(false, kivi_bytes + 4 * group, &index, 2),
                  "retained token 0 is token 16; expected strictly increasing indices below 16");
  EXPECT_CONTAINS(spoiled(true, 4 * group + 2 * (d + 2), &nan, 2), "retained token 1, channel 2 is not finite");
}

TEST(MiniCache, BadParametersAreNamed) {
  test::expect_refused_naming("minicache:kbits=3", "kbits");
  EXPECT_THROW(parse_spec("minicache:t=1.5"), SpecError);
  EXPECT_THROW(parse_spec("minicache:retain=0.6"), SpecError);
  EXPECT_THROW(parse_spec("minicache:start=-0.1"), SpecError);
}

}  // namespace
}  // namespace veloxquant::minicache
