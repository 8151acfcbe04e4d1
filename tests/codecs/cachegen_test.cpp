// CacheGen (Liu et al., SIGCOMM 2024): the entropy stage is lossless (decode of encode equals the
// plain group quantizer's reconstruction bit for bit), the blocks' coded bytes are real and below
// the slot, and corrupt blocks are refused with an Error naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "codecs/cachegen/cachegen_codec.h"
#include "codecs/kivi/affine_grid.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"
#include "veloxquant/tokenizer.h"
#include "test_data.h"

namespace veloxquant::cachegen {
namespace {

// One head of the synthetic workload (outlier key channels, smooth over tokens): [n][dim].
std::vector<float> head_stream(size_t n, size_t dim, bool keys, uint64_t seed) {
  const SyntheticKV w = make_synthetic_kv(n, 1, dim, 1, 1, seed);
  return keys ? w.keys : w.values;
}

// A stream that changes slowly from token to token (what the token-wise delta is for): [n][dim].
std::vector<float> smooth_stream(size_t n, size_t dim, uint64_t seed) {
  const std::vector<float> noise = test::gaussian(n * dim, seed, 0.05);
  std::vector<float> x(n * dim);
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < dim; ++c)
      x[t * dim + c] = static_cast<float>((1 + c % 4) * std::sin(0.02 * double(t) + double(c))) + noise[t * dim + c];
  return x;
}

void expect_message(const CachegenCodec& codec, const std::vector<uint8_t>& codes, size_t n,
                    const std::string& field) {
  try {
    codec.check_codes(codes.data(), n);
    ADD_FAILURE() << "corrupt " << field << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

class CachegenRoundTrip : public ::testing::TestWithParam<std::tuple<unsigned, size_t, size_t>> {};

// decode(encode(x)) == dequantize(quantize(x)) exactly, block by block, and the quantizer itself
// is the min/max grid (every element within half a step).
TEST_P(CachegenRoundTrip, DecodeEqualsPlainGroupQuantizer) {
  const auto [bits, dim, block] = GetParam();
  for (Stream s : {Stream::Keys, Stream::Values}) {
    const CachegenCodec codec(s, dim, bits, block, 32);
    const size_t n = 3 * block;
    const std::vector<float> x = head_stream(n, dim, s == Stream::Keys, 3 + bits);
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(x.data(), n, codes.data());
    codec.check_codes(codes.data(), n);
    std::vector<float> y(n * dim), ref(block * dim);
    codec.decode(codes.data(), n, y.data());
    for (size_t b = 0; b < n / block; ++b) {
      const QuantizedBlock q = codec.quantize(x.data() + b * block * dim);
      codec.dequantize(q, ref.data());
      ASSERT_EQ(0, std::memcmp(ref.data(), y.data() + b * block * dim, ref.size() * sizeof(float)))
          << "block " << b << " bits " << bits << " dim " << dim;
      for (size_t t = 0; t < block; ++t)
        for (size_t c = 0; c < dim; ++c) {
          const size_t p = s == Stream::Keys ? c : t * ((dim + 31) / 32) + c / std::min<size_t>(32, dim);
          const float step = f16_to_f32(q.step[p]);
          ASSERT_LE(std::fabs(ref[t * dim + c] - x[(b * block + t) * dim + c]), 0.5f * step * (1 + 1e-5f) + 1e-7f);
        }
    }
    EXPECT_LE(codec.coded_bytes(codes.data(), n), codec.code_bytes(n));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CachegenRoundTrip,
                         ::testing::Values(std::make_tuple(4u, size_t{128}, size_t{64}),
                                           std::make_tuple(2u, size_t{128}, size_t{64}),
                                           std::make_tuple(3u, size_t{80}, size_t{16}),
                                           std::make_tuple(5u, size_t{8}, size_t{64}),
                                           std::make_tuple(8u, size_t{128}, size_t{32}),
                                           std::make_tuple(7u, size_t{64}, size_t{2})));

// Against an independent reference: KIVI's grid fitted here, per channel for keys.
TEST(Cachegen, KeysMatchAnIndependentPerChannelGrid) {
  const size_t dim = 16, block = 64;
  const CachegenCodec codec(Stream::Keys, dim, 4, block, 32);
  const std::vector<float> x = test::gaussian(block * dim, 12);
  std::vector<uint8_t> codes(codec.code_bytes(block));
  codec.encode(x.data(), block, codes.data());
  std::vector<float> y(block * dim);
  codec.decode(codes.data(), block, y.data());
  for (size_t c = 0; c < dim; ++c) {
    float lo = x[c], hi = x[c];
    for (size_t t = 0; t < block; ++t) lo = std::min(lo, x[t * dim + c]), hi = std::max(hi, x[t * dim + c]);
    const kivi::AffineGrid g = kivi::AffineGrid::fit(lo, hi, 4);
    for (size_t t = 0; t < block; ++t)
      ASSERT_EQ(y[t * dim + c], g.min + g.scale * static_cast<float>(g.quantize(x[t * dim + c])));
  }
}

// The synthetic workload (independent tokens) gains little or nothing, and falls back to raw
// codes where coding does not pay; a slowly changing stream codes well below the quantized bits.
// Either way the coded bytes are what the slots hold, never more than the slot.
TEST(Cachegen, CodedBytesBelowTheQuantizedBits) {
  const size_t dim = 128, block = 64, n = 4096;
  for (Stream s : {Stream::Keys, Stream::Values}) {
    const CachegenCodec codec(s, dim, 4, block, 32);
    for (bool smooth : {false, true}) {
      const std::vector<float> x = smooth ? smooth_stream(n, dim, 21) : head_stream(n, dim, s == Stream::Keys, 21);
      std::vector<uint8_t> codes(codec.code_bytes(n));
      codec.encode(x.data(), n, codes.data());
      const size_t coded = codec.coded_bytes(codes.data(), n), slot = codec.code_bytes(n);
      std::printf("[ cachegen ] %s %s, 4 bits: slot %.3f bits/element, coded %.3f bits/element, %zu of %zu blocks rANS\n",
                  smooth ? "smooth" : "synthetic", s == Stream::Keys ? "keys" : "values",
                  8.0 * double(slot) / double(n * dim), 8.0 * double(coded) / double(n * dim),
                  codec.rans_blocks(codes.data(), n), n / block);
      EXPECT_LE(coded, slot);
      if (smooth) {
        EXPECT_EQ(codec.rans_blocks(codes.data(), n), n / block);
        EXPECT_LT(coded, slot * 3 / 4);
      }
    }
  }
}

// Constant blocks code to almost nothing; white noise falls back to raw codes, which still
// decode exactly.
TEST(Cachegen, ConstantAndNoiseBlocks) {
  const size_t dim = 64, block = 64;
  const CachegenCodec codec(Stream::Keys, dim, 8, block, 32);
  std::vector<float> flat(block * dim, 0.25f);
  std::vector<uint8_t> codes(codec.code_bytes(block));
  codec.encode(flat.data(), block, codes.data());
  EXPECT_EQ(codec.rans_blocks(codes.data(), block), 1u);
  EXPECT_LT(codec.coded_bytes(codes.data(), block), 4 * dim + 8 + dim + 600);
  std::vector<float> y(block * dim);
  codec.decode(codes.data(), block, y.data());
  for (float v : y) ASSERT_EQ(v, y[0]);

  const std::vector<float> noise = test::gaussian(block * dim, 5);
  codec.encode(noise.data(), block, codes.data());
  codec.check_codes(codes.data(), block);
  codec.decode(codes.data(), block, y.data());
  std::vector<float> ref(block * dim);
  codec.dequantize(codec.quantize(noise.data()), ref.data());
  EXPECT_EQ(y, ref);
}

TEST(Cachegen, CheckCodesNamesTheCorruptField) {
  const size_t dim = 32, block = 64, n = 2 * block;
  const CachegenCodec codec(Stream::Keys, dim, 4, block, 32);
  const std::vector<float> x = smooth_stream(n, dim, 8);
  std::vector<uint8_t> good(codec.code_bytes(n));
  codec.encode(x.data(), n, good.data());
  ASSERT_EQ(codec.rans_blocks(good.data(), n), 2u);
  codec.check_codes(good.data(), n);
  const size_t header = codec.slot_bytes() + 4 * dim;  // block 1's header
  // decode() does not check the grids nor the padding (check_codes does), but the payload it
  // parses with bounds checks: a corrupt payload is an Error there too.
  auto corrupt = [&](auto edit, const std::string& field, bool decode_throws) {
    std::vector<uint8_t> bad = good;
    edit(bad);
    expect_message(codec, bad, n, field);
    std::vector<float> y(n * dim);
    if (decode_throws) {
      EXPECT_THROW(codec.decode(bad.data(), n, y.data()), Error) << field;
    }
  };
  auto set_length = [&](std::vector<uint8_t>& b, uint32_t v) {
    for (int k = 0; k < 4; ++k) b[header + 4 + k] = static_cast<uint8_t>(v >> (8 * k));
  };
  uint32_t length = 0;
  for (int k = 0; k < 4; ++k) length |= static_cast<uint32_t>(good[header + 4 + k]) << (8 * k);
  corrupt([&](auto& b) { b[codec.slot_bytes() + 1] = 0x7C; }, "step[0]", false);       // step = inf
  corrupt([&](auto& b) { b[codec.slot_bytes() + 2 * dim + 1] = 0xFF; }, "min[0]", false);  // min = NaN
  corrupt([&](auto& b) { b[header] = 2; }, "mode", true);
  corrupt([&](auto& b) { b[header + 1] = 1; }, "header", true);
  corrupt([&](auto& b) { b[header + 6] = 0x10; }, "payload length", true);
  corrupt([&](auto& b) { b[header] = 0; }, "payload length", true);  // raw must fill the slot
  // The frequency table follows the anchor codes: its first entry changed breaks the sum.
  corrupt([&](auto& b) { b[header + 8 + dim / 2] ^= 0x01; }, "frequency table", true);
  // The stream one byte short.
  corrupt([&](auto& b) { set_length(b, length - 1); b[header + 8 + length - 1] = 0; }, "rANS stream", true);
  corrupt([&](auto& b) { b[2 * codec.slot_bytes() - 1] = 1; }, "padding", false);
  // Every single-byte change is refused or decodes (never a crash): decode follows check_codes.
  for (size_t i = 0; i < good.size(); i += 7) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x5A;
    try {
      codec.check_codes(bad.data(), n);
      std::vector<float> y(n * dim);
      codec.decode(bad.data(), n, y.data());
    } catch (const Error&) {
    }
  }
}

// Inside a cache: codes plus the fp16 residual, and attention close to the decoded reference.
TEST(Cachegen, WorksInsideTheCache) {
  const SyntheticKV w = make_synthetic_kv(300, 2, 128, 4, 3, 1);
  KVCache cache("cachegen", LayerShape{2, 128, 0, 1});
  cache.append(TensorView::f32(w.keys.data(), {300, 2, 128}), TensorView::f32(w.values.data(), {300, 2, 128}));
  const std::vector<float> k = cache.decode_keys();
  double num = 0, den = 0;
  for (size_t i = 0; i < k.size(); ++i) num += (k[i] - w.keys[i]) * double(k[i] - w.keys[i]), den += w.keys[i] * double(w.keys[i]);
  EXPECT_LT(std::sqrt(num / den), 0.1);
}


// Real keys and values: the caches of the project's vq-hd128 model after 2048 tokens of the
// wikitext-2 test text, default parameters. Prints the slot and the coded bytes per element
// (docs/methods/cachegen.md) and checks every block decodes back to what the cache holds.
TEST(Cachegen, CodedBytesOnTheOwnModel) {
  const std::string path = std::string(VELOXQUANT_MODELS_DIR) + "/vq-hd128.gguf";
  std::ifstream f(std::string(VELOXQUANT_SHARED_DIR) + "/corpus/wikitext-2-raw/wiki.test.raw");
  if (!std::ifstream(path) || !f) GTEST_SKIP() << "needs models/vq-hd128.gguf and the shared corpus";
  std::string text(40000, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(f.gcount()));
  const Model model = Model::load(path);
  std::vector<int32_t> tokens = model.tokenizer().encode(text, true);
  ASSERT_GE(tokens.size(), 2048u);
  tokens.resize(2048);
  Session s(model, {"cachegen", 0});
  s.eval(tokens);
  size_t elements[2] = {0, 0}, slot[2] = {0, 0}, coded[2] = {0, 0}, rans[2] = {0, 0}, blocks[2] = {0, 0};
  for (const KVCache& cache : s.caches()) {
    for (int k = 0; k < 2; ++k) {
      const CachegenCodec codec(k == 0 ? Stream::Keys : Stream::Values, cache.head_dim(), 4, 64, 32);
      for (const CacheStream& st : k == 0 ? cache.key_streams() : cache.value_streams()) {
        codec.check_codes(st.codes.data(), st.encoded);
        elements[k] += st.encoded * cache.head_dim();
        slot[k] += codec.code_bytes(st.encoded);
        coded[k] += codec.coded_bytes(st.codes.data(), st.encoded);
        rans[k] += codec.rans_blocks(st.codes.data(), st.encoded);
        blocks[k] += st.encoded / 64;
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    ASSERT_GT(elements[k], 0u);
    std::printf("[ cachegen ] vq-hd128 %s, 2048 tokens: slot %.3f bits/element, coded %.3f bits/element, %zu of %zu blocks rANS\n",
                k == 0 ? "keys" : "values", 8.0 * double(slot[k]) / double(elements[k]),
                8.0 * double(coded[k]) / double(elements[k]), rans[k], blocks[k]);
    EXPECT_LE(coded[k], slot[k]);
  }
}

}  // namespace
}  // namespace veloxquant::cachegen
