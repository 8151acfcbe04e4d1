// The cache's contract for bad numbers (docs/reliability.md): a NaN, an infinity or a finite value
// beyond the fp16 range in appended keys or values is refused with a ShapeError that names the
// layer, the stream, the token, the head, the channel and the value, and nothing is stored. All-zero
// vectors are stored and attended like any others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr size_t kHeads = 2, kDim = 16, kTokens = 3;

class CacheBadNumbers : public ::testing::TestWithParam<std::string> {
 protected:
  // Layer 5 of 6; a calibrated method gets tables fitted to a synthetic draw.
  KVCache cache{GetParam(), with_synthetic_calibration(parse_spec(GetParam()), LayerShape{kHeads, kDim, 5, 0, 6})};
  std::vector<float> good = std::vector<float>(kTokens * kHeads * kDim, 0.25f);

  static TensorView view(const std::vector<float>& x) {
    return TensorView::f32(x.data(), {x.size() / (kHeads * kDim), kHeads, kDim});
  }
  // The message of appending `bad` at token 2, head 1, channel 7 as keys (or values).
  std::string append_error(float bad, bool keys) {
    std::vector<float> x = good;
    x[(2 * kHeads + 1) * kDim + 7] = bad;
    return test::error_message<ShapeError>([&] {
      keys ? cache.append(view(x), view(good)) : cache.append(view(good), view(x));
    });
  }
};

TEST_P(CacheBadNumbers, NonFiniteIsRefusedNamingWhere) {
  cache.append(view(good), view(good));  // so the cache position differs from the token index
  for (bool keys : {true, false}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      const std::string msg = append_error(bad, keys);
      EXPECT_CONTAINS(msg, std::string("layer 5 ") + (keys ? "keys" : "values"));
      EXPECT_CONTAINS(msg, "token 2 of the append (cache position 5), head 1, channel 7");
      EXPECT_CONTAINS(msg, std::isnan(bad) ? "nan" : "inf");
      EXPECT_CONTAINS(msg, "expected a finite number");
    }
  }
  EXPECT_EQ(cache.tokens(), kTokens);  // nothing half-appended
}

TEST_P(CacheBadNumbers, BeyondFp16RangeIsRefusedNamingTheValue) {
  for (bool keys : {true, false}) {
    for (const auto& [bad, text] : {std::pair{1e30f, "is 1e+30;"}, std::pair{-70000.0f, "is -70000;"},
                                    std::pair{65520.0f, "is 65520;"}}) {
      const std::string msg = append_error(bad, keys);
      EXPECT_CONTAINS(msg, "token 2 of the append (cache position 2), head 1, channel 7");
      EXPECT_CONTAINS(msg, text);
      EXPECT_CONTAINS(msg, "expected |x| <= 65504");
    }
  }
  EXPECT_EQ(cache.tokens(), 0u);
}

TEST_P(CacheBadNumbers, RopeThatLeavesTheFp16RangeIsRefused) {
  if (parse_spec(GetParam()).method->keys_before_rope) {
    // Keys are stored before RoPE, where they are within the fp16 range, and rotated in f32 when
    // read: a pair at the fp16 limit at position 1 is stored and reads back finite.
    std::vector<float> k = good;
    k[kHeads * kDim] = k[kHeads * kDim + 1] = 65504.0f;
    const std::vector<int64_t> positions = {0, 1, 2};
    cache.append(view(k), view(good), positions, RopeParams{.dims = kDim, .freq_base = 10000.0f});
    EXPECT_EQ(cache.tokens(), kTokens);
    const std::vector<float> keys = cache.decode_keys();
    EXPECT_TRUE(std::all_of(keys.begin(), keys.end(), [](float x) { return std::isfinite(x); }));
    return;
  }
  // A pair at the fp16 limit rotated by about 45 degrees has a component of 65504 * sqrt(2).
  std::vector<float> k = good;
  k[0] = k[1] = 65504.0f;
  const std::vector<int64_t> positions = {1, 2, 3};
  const RopeParams rope{.dims = kDim, .freq_base = 10000.0f};
  const std::string msg = test::error_message<ShapeError>(
      [&] { cache.append(view(k), view(good), positions, rope); });
  EXPECT_CONTAINS(msg, "keys after RoPE: token 0 of the append");
  EXPECT_CONTAINS(msg, "expected |x| <= 65504");
}

TEST_P(CacheBadNumbers, ZeroVectorsAreStoredAndAttended) {
  const std::vector<float> zeros(300 * kHeads * kDim, 0.0f);
  cache.append(view(zeros), view(zeros));
  for (float x : cache.decode_keys()) ASSERT_EQ(x, 0.0f);
  for (float x : cache.decode_values()) ASSERT_EQ(x, 0.0f);
  const std::vector<float> q(kHeads * kDim, 1.0f);
  std::vector<float> out(q.size(), 1.0f);
  for (AttendPath path : {AttendPath::Fused, AttendPath::Decoded, AttendPath::Reference}) {
    cache.attend(TensorView::f32(q.data(), {1, kHeads, kDim}), out.data(), path);
    for (float x : out) ASSERT_EQ(x, 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, CacheBadNumbers, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const auto& m : registered_methods()) names.push_back(m.name);
                           return names;
                         }()),
                         [](const auto& test_param) { return test_param.param; });

}  // namespace
}  // namespace veloxquant
