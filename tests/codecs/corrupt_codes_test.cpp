// Codes that encode() cannot have written (a corrupt file, a bad session) are refused by
// Codec::check_codes with an Error, which KVCache::restore calls before attention can use them
// as indices into memory or as numbers the kernels cannot convert. The QJL and KIVI cases are
// findings of fuzz/codec_fuzzer.cpp; their inputs are kept in fuzz/corpus/codec/ under the names
// in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codecs/qjl/qjl_key_codec.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/error.h"
#include "veloxquant/cache.h"
#include "veloxquant/method.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

// regress-qjl-outlier-channel-out-of-range: a QJL block header names its outlier channels (one
// byte each at head_dim <= 256), which decode and score use as indices.
TEST(CorruptCodes, QjlOutlierChannelsOutOfRangeOrOutOfOrderAreRefused) {
  const QjlKeyCodec codec(QjlKeyConfig{.dim = 32, .proj = 64, .outliers = 2, .outlier_proj = 32,
                                       .group = 4, .seed = 1});
  const size_t n = codec.block_tokens();
  const std::vector<float> x = test::gaussian(n * codec.dim(), 3);
  std::vector<uint8_t> good(codec.code_bytes(n));
  codec.encode(x.data(), n, good.data());
  ASSERT_LT(good[0], good[1]);  // the header: two increasing channels
  for (const auto& [first, second, named] :
       {std::tuple{good[0], uint8_t{32}, "outlier channel 32 at header slot 1"},
        std::tuple{uint8_t{200}, good[1], "outlier channel 200 at header slot 0"},
        std::tuple{good[1], good[0], "at header slot 1"}, std::tuple{good[0], good[0], "at header slot 1"}}) {
    std::vector<uint8_t> bad = good;
    bad[0] = first;
    bad[1] = second;
    const std::string msg = test::error_message<Error>([&] { codec.check_codes(bad.data(), n); });
    EXPECT_CONTAINS(msg, "qjl: corrupt key codes: block 0, outlier channel ");
    EXPECT_CONTAINS(msg, named);
    EXPECT_CONTAINS(msg, "expected increasing channels below head_dim 32");
  }
  EXPECT_NO_THROW(codec.check_codes(good.data(), n));
}

// regress-kivi-non-finite-stored-step: KIVI stores an fp16 step and minimum per group; a NaN, an
// infinity or a negative step would make the fused value sums convert NaN to an integer
// (undefined behaviour) and decode return NaN. Keys (per channel, at the start of each token group) and values
// (per token and channel group, after each quad's codes) are both checked.
TEST(CorruptCodes, KiviNonFiniteOrNegativeStoredGridsAreRefused) {
  const size_t d = 32, group = 16;
  const LayerCodecs codecs = find_method("kivi").make(parse_spec("kivi:group=16").params,
                                                      LayerShape{1, d, 0, 0});
  for (const bool keys : {true, false}) {
    const Codec& codec = keys ? *codecs.key : *codecs.value;
    const size_t n = codec.block_tokens(), params = keys ? d : 4 * (d / group);
    const std::vector<float> x = test::gaussian(n * d, 5);
    std::vector<uint8_t> good(codec.code_bytes(n));
    codec.encode(x.data(), n, good.data());
    // Keys: steps then minimums open the block; values: they close the quad.
    const size_t steps_at = keys ? 0 : good.size() - 4 * params;
    for (const auto& [offset, half] : {std::pair{steps_at, uint16_t{0x7e00}},             // NaN step
                                       std::pair{steps_at + 2, uint16_t{0x7c00}},         // +inf step
                                       std::pair{steps_at, uint16_t{0xbc00}},             // step -1
                                       std::pair{steps_at + 2 * params, uint16_t{0xfc00}}}) {  // -inf min
      std::vector<uint8_t> bad = good;
      std::memcpy(bad.data() + offset, &half, 2);
      const std::string msg = test::error_message<Error>([&] { codec.check_codes(bad.data(), n); });
      EXPECT_CONTAINS(msg, std::string("kivi: corrupt ") + (keys ? "key" : "value") + " codes: block 0");
      EXPECT_CONTAINS(msg, "expected a finite step >= 0 and a finite minimum");
    }
    EXPECT_NO_THROW(codec.check_codes(good.data(), n));
  }
}

// Stored magnitudes: fp16 rows never hold infinities or NaNs (the cache refuses them on append);
// TurboQuant norms (turboquant_prod: two per token) are norms of finite vectors; PolarQuant keeps
// an fp16 radius per block of coordinates after its angle codes. Each case spoils one field of
// token 1 of two encoded tokens.
struct SpoiledField {
  const char* method;
  size_t offset_in_token;  // from the start of token 1's record; SIZE_MAX: its last two bytes
  std::vector<uint8_t> bytes;
  const char* message;
};

std::vector<uint8_t> bytes_of(auto v) {
  std::vector<uint8_t> out(sizeof v);
  std::memcpy(out.data(), &v, sizeof v);
  return out;
}

TEST(CorruptCodes, StoredMagnitudesMustBeFiniteAndNonNegative) {
  const size_t d = 32;
  const std::vector<SpoiledField> cases = {
      {"fp16", 2 * 3, bytes_of(uint16_t{0x7C00}),
       "fp16: corrupt codes: token 1, channel 3 holds inf; expected a finite half"},
      {"turboquant_mse", 0, bytes_of(std::nanf("")),
       "turboquant: corrupt codes: token 1 stores norm nan; expected a finite norm >= 0"},
      {"turboquant_prod", 4, bytes_of(INFINITY), "turboquant_prod: corrupt codes: token 1 stores norms"},
      {"polar", SIZE_MAX, bytes_of(uint16_t{0xBC00}), "polar: corrupt codes: token 1, block"},
  };
  for (const SpoiledField& f : cases) {
    SCOPED_TRACE(f.method);
    const LayerCodecs codecs = find_method(f.method).make(parse_spec(f.method).params, LayerShape{1, d, 0, 0});
    const Codec& codec = *codecs.key;
    const std::vector<float> x = test::gaussian(2 * d, 7);
    std::vector<uint8_t> codes(codec.code_bytes(2));
    codec.encode(x.data(), 2, codes.data());
    EXPECT_NO_THROW(codec.check_codes(codes.data(), 2));
    const size_t at = f.offset_in_token == SIZE_MAX ? codec.code_bytes(2) - 2
                                                    : codec.code_bytes(1) + f.offset_in_token;
    std::copy(f.bytes.begin(), f.bytes.end(), codes.begin() + static_cast<std::ptrdiff_t>(at));
    EXPECT_CONTAINS(test::error_message<Error>([&] { codec.check_codes(codes.data(), 2); }), f.message);
  }
}

// KVCache::restore runs the check, so corrupt codes never reach attention.
TEST(CorruptCodes, CacheRestoreRefusesCodesTheCodecRefuses) {
  const LayerShape shape{1, 32, 0, 0};
  KVCache cache("kivi:group=16,residual=0", shape);
  const std::vector<float> k = test::gaussian(16 * 32, 1), v = test::gaussian(16 * 32, 2);
  cache.append(TensorView::f32(k.data(), {16, 1, 32}), TensorView::f32(v.data(), {16, 1, 32}));
  std::vector<CacheStream> keys = cache.key_streams(), values = cache.value_streams();
  const uint16_t nan = 0x7E00;
  std::memcpy(keys[0].codes.data(), &nan, 2);  // the first channel's step
  KVCache restored("kivi:group=16,residual=0", shape);
  EXPECT_CONTAINS(test::error_message<Error>([&] { restored.restore(keys, values); }),
                  "the key stream of KV head 0: kivi: corrupt key codes: block 0, parameter 0 stores step nan");
  EXPECT_EQ(restored.tokens(), 0u);
  keys = cache.key_streams();
  EXPECT_NO_THROW(restored.restore(keys, values));
  EXPECT_EQ(restored.tokens(), 16u);
}

}  // namespace
}  // namespace veloxquant
