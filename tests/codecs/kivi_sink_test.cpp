// kivi_sink (KVSink on KIVI): the most attended keys of each group are kept fp16 and out of the
// group's grids. sinks=0 is KIVI byte for byte; the failure mode it prevents (a sink inflating
// its group's scale) is reproduced on KIVI and gone here; the sinks follow the real attention
// rather than key norms when the cache has it; scores, corrupt codes and parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi_sink/kivi_sink_key_codec.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kivi_sink {
namespace {

using test::round_trip;
using test::sq_error;

size_t sink_index(const KiviSinkKeyCodec& codec, const std::vector<uint8_t>& codes, size_t block, size_t i) {
  uint16_t t;
  std::memcpy(&t, codec.sink_indices(codes.data(), block) + 2 * i, 2);
  return t;
}

TEST(KiviSink, NoSinksIsKiviByteForByte) {
  for (unsigned bits : {2u, 4u}) {
    for (size_t d : {size_t{128}, size_t{80}, size_t{8}}) {
      const size_t group = 32, n = 3 * group;
      const std::vector<float> k = test::gaussian(n * d, d + bits);
      const kivi::KiviKeyCodec kivi(d, bits, group);
      const KiviSinkKeyCodec sink(d, bits, group, 0);
      ASSERT_EQ(sink.code_bytes(n), kivi.code_bytes(n));
      std::vector<uint8_t> a(kivi.code_bytes(n)), b(a.size());
      kivi.encode(k.data(), n, a.data());
      sink.encode(k.data(), n, b.data());
      EXPECT_EQ(a, b) << bits << " bits, head_dim " << d;
    }
  }
}

TEST(KiviSink, CodeBytesAreKiviPlusTheSinkRows) {
  for (size_t d : {size_t{128}, size_t{80}, size_t{8}}) {
    for (size_t sinks : {size_t{1}, size_t{3}}) {
      const KiviSinkKeyCodec codec(d, 2, 32, sinks);
      const size_t kivi = 4 * d + 32 * d * 2 / 8;
      EXPECT_EQ(codec.block_bytes(), kivi + sinks * (2 + 2 * d));
      EXPECT_EQ(codec.code_bytes(64), 2 * codec.block_bytes());
    }
  }
  EXPECT_EQ(KiviSinkKeyCodec(128, 2, 32, 1).block_bytes(), 1536u + 258u);
}

// The failure mode KVSink names: one sink key far larger than its neighbours sets its group's
// per-channel grids, and every other key of the group loses its precision. Kept out of the grids,
// the others decode exactly as KIVI decodes the group without the sink.
TEST(KiviSink, ASinkNoLongerInflatesItsGroupsScale) {
  const size_t d = 64, group = 32, sink = 5;
  std::vector<float> k = test::gaussian(group * d, 11);
  for (size_t c = 0; c < d; ++c) k[sink * d + c] *= 200.0f;
  const kivi::KiviKeyCodec kivi(d, 2, group);
  const KiviSinkKeyCodec codec(d, 2, group, 1);
  const std::vector<float> by_kivi = round_trip(kivi, k, group), by_sink = round_trip(codec, k, group);
  double kivi_err = 0, sink_err = 0;
  for (size_t t = 0; t < group; ++t) {
    if (t == sink) continue;
    for (size_t c = 0; c < d; ++c) {
      kivi_err += std::pow(by_kivi[t * d + c] - k[t * d + c], 2);
      sink_err += std::pow(by_sink[t * d + c] - k[t * d + c], 2);
    }
  }
  EXPECT_LT(sink_err, kivi_err / 20) << "KIVI " << kivi_err << ", kivi_sink " << sink_err;
  for (size_t c = 0; c < d; ++c) EXPECT_EQ(by_sink[sink * d + c], f16_to_f32(f32_to_f16(k[sink * d + c])));
  // The others: KIVI's decode of the group with the sink's row replaced by a non-sink row.
  std::vector<float> without = k;
  std::copy_n(k.begin(), d, without.begin() + sink * d);
  const std::vector<float> reference = round_trip(kivi, without, group);
  for (size_t t = 0; t < group; ++t) {
    if (t == sink) continue;
    for (size_t c = 0; c < d; ++c) ASSERT_EQ(by_sink[t * d + c], reference[t * d + c]) << t << "," << c;
  }
}

TEST(KiviSink, AttentionChoosesTheSinksAndKeyNormsStandIn) {
  const size_t d = 32, group = 16;
  std::vector<float> k = test::gaussian(2 * group * d, 12);
  for (size_t c = 0; c < d; ++c) k[7 * d + c] *= 10.0f;            // the largest key of block 0
  for (size_t c = 0; c < d; ++c) k[(group + 2) * d + c] *= 10.0f;  // and of block 1
  std::vector<float> attention(2 * group, 0.01f);
  attention[3] = 0.5f;           // block 0: a small key that the queries attend to
  attention[group + 9] = 0.3f;   // block 1
  attention[group + 10] = 0.3f;  // a tie: the earlier token wins
  const KiviSinkKeyCodec codec(d, 2, group, 1);
  std::vector<uint8_t> by_norm(codec.code_bytes(2 * group)), by_attention(by_norm.size());
  codec.encode(k.data(), 2 * group, by_norm.data());
  codec.encode_salient(k.data(), 2 * group, attention.data(), by_attention.data());
  EXPECT_EQ(sink_index(codec, by_norm, 0, 0), 7u);
  EXPECT_EQ(sink_index(codec, by_norm, 1, 0), 2u);
  EXPECT_EQ(sink_index(codec, by_attention, 0, 0), 3u);
  EXPECT_EQ(sink_index(codec, by_attention, 1, 0), 9u);
  // Two sinks a block: both, in increasing order.
  const KiviSinkKeyCodec two(d, 2, group, 2);
  std::vector<uint8_t> codes(two.code_bytes(2 * group));
  two.encode_salient(k.data(), 2 * group, attention.data(), codes.data());
  EXPECT_EQ(sink_index(two, codes, 1, 0), 9u);
  EXPECT_EQ(sink_index(two, codes, 1, 1), 10u);
}

TEST(KiviSink, FusedScoresMatchDecodedKeys) {
  for (size_t d : {size_t{128}, size_t{80}}) {
    const size_t n = 64, nq = 3;
    std::vector<float> k = test::gaussian(n * d, 13), q = test::gaussian(nq * d, 14);
    for (size_t c = 0; c < d; ++c) k[40 * d + c] *= 50.0f;
    const KiviSinkKeyCodec codec(d, 2, 32, 1);
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(k.data(), n, codes.data());
    std::vector<float> fused(nq * n), plain(nq * n);
    codec.score(q.data(), nq, codes.data(), n, fused.data());
    codec.Codec::score(q.data(), nq, codes.data(), n, plain.data());
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_NEAR(fused[i], plain[i], 2e-3 * (1 + std::fabs(plain[i]))) << i;
    for (size_t r = 0; r < nq; ++r) EXPECT_FLOAT_EQ(fused[r * n + 40], plain[r * n + 40]);  // the sink, exact
  }
}

TEST(KiviSink, CorruptCodesAreRefused) {
  const size_t d = 16, group = 16;
  const KiviSinkKeyCodec codec(d, 2, group, 2);
  const std::vector<float> k = test::gaussian(group * d, 15);
  std::vector<uint8_t> good(codec.code_bytes(group));
  codec.encode(k.data(), group, good.data());
  EXPECT_NO_THROW(codec.check_codes(good.data(), group));
  const size_t index_at = codec.block_bytes() - 2 * (2 + 2 * d);  // the sinks follow KIVI's bytes
  auto spoiled = [&](size_t at, uint16_t value) {
    std::vector<uint8_t> c = good;
    std::memcpy(c.data() + at, &value, 2);
    return test::error_message<Error>([&] { codec.check_codes(c.data(), group); });
  };
  EXPECT_CONTAINS(spoiled(index_at, 16), "block 0, sink 0 is token 16; expected strictly increasing indices below 16");
  const uint16_t second = sink_index(codec, good, 0, 1);
  EXPECT_CONTAINS(spoiled(index_at, second), "block 0, sink 1 is token");
  EXPECT_CONTAINS(spoiled(index_at + 4 + 2 * d + 6, 0x7C00), "block 0, sink 1, channel 3 is not finite");
}

TEST(KiviSink, BadParametersAreNamed) {
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("kivi_sink:sinks=9"); }), "sinks");
  EXPECT_CONTAINS(test::error_message<SpecError>([] { KVCache("kivi_sink:group=17", LayerShape{1, 8, 0, 0}); }),
                  "group");
}

// In a cache, the sink is the key the queries attend to, found from their attention at the end
// of the step; a cache that never saw attention falls back to the largest key.
TEST(KiviSink, TheCacheFindsTheSinkFromTheQueriesAttention) {
  const size_t d = 32, n = 40;
  std::vector<float> k = test::gaussian(n * d, 16, 0.3), v = test::gaussian(n * d, 17);
  std::vector<float> q(n * d);
  for (size_t c = 0; c < d; ++c) {
    k[0 * d + c] = c % 2 ? 1.0f : -1.0f;  // what every query looks for
    k[7 * d + c] = c < d / 2 ? 4.0f : 0.0f;  // the largest key, orthogonal to the queries
    for (size_t i = 0; i < n; ++i) q[i * d + c] = 3.0f * k[c];
  }
  const auto view = [&](const std::vector<float>& x, size_t from, size_t m) {
    return TensorView::f32(x.data() + from * d, {m, 1, d});
  };
  KVCache attended("kivi_sink:group=32,residual=0", LayerShape{1, d, 0, 0});
  attended.append(view(k, 0, n), view(v, 0, n));
  std::vector<float> out(n * d);
  attended.attend_observed(TensorView::f32(q.data(), {n, 1, d}), out.data());
  attended.finish_step();
  KVCache unattended("kivi_sink:group=32,residual=0", LayerShape{1, d, 0, 0});
  unattended.append(view(k, 0, n), view(v, 0, n));
  unattended.finish_step();
  KVCache by_norm("kivi_sink:group=32,residual=0,saliency=key_norm", LayerShape{1, d, 0, 0});
  by_norm.append(view(k, 0, n), view(v, 0, n));
  by_norm.attend_observed(TensorView::f32(q.data(), {n, 1, d}), out.data());
  by_norm.finish_step();
  ASSERT_EQ(by_norm.key_streams()[0].encoded, 32u);
  const KiviSinkKeyCodec codec(d, 2, 32, 1);
  EXPECT_EQ(sink_index(codec, by_norm.key_streams()[0].codes, 0, 0), 7u);
  ASSERT_EQ(attended.key_streams()[0].encoded, 32u);
  EXPECT_EQ(sink_index(codec, attended.key_streams()[0].codes, 0, 0), 0u);
  EXPECT_EQ(sink_index(codec, unattended.key_streams()[0].codes, 0, 0), 7u);
  const std::vector<float> keys = attended.decode_keys();
  for (size_t c = 0; c < d; ++c) EXPECT_EQ(keys[c], k[c]);
}

}  // namespace
}  // namespace veloxquant::kivi_sink
