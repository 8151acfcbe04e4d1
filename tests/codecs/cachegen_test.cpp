// CacheGen (Liu et al., SIGCOMM 2024): the entropy stage is lossless (decode of encode equals the
// plain group quantizer's reconstruction bit for bit), blocks are stored back to back at their
// coded size and that is what the cache counts, and corrupt blocks (a field, a block length) are
// refused with an Error naming what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "codecs/cachegen/cachegen_codec.h"
#include "codecs/common/affine_grid.h"
#include "eval/synthetic_kv.h"
#include "expect_error.h"
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

// The codes of x's first n tokens, exactly as many bytes as encode() wrote.
std::vector<uint8_t> encoded(const Codec& codec, const std::vector<float>& x, size_t n) {
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  codes.resize(codec.encoded_bytes(codes.data(), n, codes.size()));
  return codes;
}

// The bytes of block b of `codes` (variable length: found by walking the blocks before it).
std::vector<uint8_t> block_bytes(const Codec& codec, const std::vector<uint8_t>& codes, size_t b) {
  const size_t at = codec.encoded_bytes(codes.data(), b * codec.block_tokens(), codes.size());
  const size_t n = codec.encoded_block_bytes(codes.data() + at, codes.size() - at);
  return {codes.begin() + static_cast<std::ptrdiff_t>(at), codes.begin() + static_cast<std::ptrdiff_t>(at + n)};
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
    const std::vector<uint8_t> codes = encoded(codec, x, n);  // decoded from exactly these bytes
    EXPECT_LE(codes.size(), codec.code_bytes(n));
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
  }
}

// The blocks are stored back to back with nothing between them: the codes of a stream are the
// codes of each block encoded alone, concatenated.
TEST_P(CachegenRoundTrip, BlocksAreStoredBackToBack) {
  const auto [bits, dim, block] = GetParam();
  for (Stream s : {Stream::Keys, Stream::Values}) {
    const CachegenCodec codec(s, dim, bits, block, 32);
    const size_t n = 3 * block;
    const std::vector<float> x = smooth_stream(n, dim, 4 + bits);
    std::vector<uint8_t> alone;
    for (size_t b = 0; b < 3; ++b) {
      const std::vector<float> one(x.begin() + static_cast<std::ptrdiff_t>(b * block * dim),
                                   x.begin() + static_cast<std::ptrdiff_t>((b + 1) * block * dim));
      const std::vector<uint8_t> codes = encoded(codec, one, block);
      EXPECT_EQ(codec.encoded_block_bytes(codes.data(), codes.size()), codes.size());
      alone.insert(alone.end(), codes.begin(), codes.end());
    }
    EXPECT_TRUE(encoded(codec, x, n) == alone) << "bits " << bits << " dim " << dim << " block " << block;
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
  const std::vector<uint8_t> codes = encoded(codec, x, block);
  std::vector<float> y(block * dim);
  codec.decode(codes.data(), block, y.data());
  for (size_t c = 0; c < dim; ++c) {
    float lo = x[c], hi = x[c];
    for (size_t t = 0; t < block; ++t) lo = std::min(lo, x[t * dim + c]), hi = std::max(hi, x[t * dim + c]);
    const AffineGrid g = AffineGrid::fit(lo, hi, 4);
    for (size_t t = 0; t < block; ++t)
      ASSERT_EQ(y[t * dim + c], g.min + g.scale * static_cast<float>(g.quantize(x[t * dim + c])));
  }
}

// The synthetic workload (independent tokens) gains little or nothing, and falls back to raw
// codes where coding does not pay; a slowly changing stream codes well below the quantized bits.
// Either way a stream is never more than code_bytes(), the bound of every block stored raw.
TEST(Cachegen, CodedBytesBelowTheQuantizedBits) {
  const size_t dim = 128, block = 64, n = 4096;
  for (Stream s : {Stream::Keys, Stream::Values}) {
    const CachegenCodec codec(s, dim, 4, block, 32);
    for (bool smooth : {false, true}) {
      const std::vector<float> x = smooth ? smooth_stream(n, dim, 21) : head_stream(n, dim, s == Stream::Keys, 21);
      const std::vector<uint8_t> codes = encoded(codec, x, n);
      const size_t raw = codec.code_bytes(n);
      std::printf("[ cachegen ] %s %s, 4 bits: raw blocks %.3f bits/element, coded %.3f bits/element, %zu of %zu blocks rANS\n",
                  smooth ? "smooth" : "synthetic", s == Stream::Keys ? "keys" : "values",
                  8.0 * double(raw) / double(n * dim), 8.0 * double(codes.size()) / double(n * dim),
                  codec.rans_blocks(codes.data(), n), n / block);
      EXPECT_LE(codes.size(), raw);
      if (smooth) {
        EXPECT_EQ(codec.rans_blocks(codes.data(), n), n / block);
        EXPECT_LT(codes.size(), raw * 3 / 4);
      }
    }
  }
}

// Constant blocks code to almost nothing; white noise falls back to raw codes, which still
// decode exactly.
TEST(Cachegen, ConstantAndNoiseBlocks) {
  const size_t dim = 64, block = 64;
  const CachegenCodec codec(Stream::Keys, dim, 8, block, 32);
  const std::vector<float> flat(block * dim, 0.25f);
  std::vector<uint8_t> codes = encoded(codec, flat, block);
  EXPECT_EQ(codec.rans_blocks(codes.data(), block), 1u);
  EXPECT_LT(codes.size(), 4 * dim + 8 + dim + 600);
  std::vector<float> y(block * dim);
  codec.decode(codes.data(), block, y.data());
  for (float v : y) ASSERT_EQ(v, y[0]);

  const std::vector<float> noise = test::gaussian(block * dim, 5);
  codes = encoded(codec, noise, block);
  EXPECT_EQ(codes.size(), codec.code_bytes(block));  // raw: the bound itself
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
  const std::vector<uint8_t> good = encoded(codec, x, n);
  ASSERT_EQ(codec.rans_blocks(good.data(), n), 2u);
  codec.check_codes(good.data(), n);
  const size_t second = block_bytes(codec, good, 0).size();  // where block 1 starts
  const size_t header = second + 4 * dim;                     // block 1's header
  // decode() does not check the grids (check_codes does), but the header and the payload it
  // parses with bounds checks: a corrupt one is an Error there too.
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
  const uint32_t length = static_cast<uint32_t>(good.size() - header - CachegenCodec::kHeaderBytes);
  corrupt([&](auto& b) { b[second + 1] = 0x7C; }, "step[0]", false);            // step = inf
  corrupt([&](auto& b) { b[second + 2 * dim + 1] = 0xFF; }, "min[0]", false);   // min = NaN
  corrupt([&](auto& b) { b[header] = 2; }, "mode", true);
  corrupt([&](auto& b) { b[header + 1] = 1; }, "header", true);
  corrupt([&](auto& b) { b[header + 6] = 0x10; }, "payload length", true);
  corrupt([&](auto& b) { b[header] = 0; }, "payload length", true);  // raw holds all the codes
  // The frequency table follows the anchor codes: its first entry changed breaks the sum.
  corrupt([&](auto& b) { b[header + 8 + dim / 2] ^= 0x01; }, "frequency table", true);
  // The stream one byte short.
  corrupt([&](auto& b) { set_length(b, length - 1); b.pop_back(); }, "rANS stream", true);
  // Every single-byte change is refused or decodes (never a crash): as in KVCache::restore, the
  // block lengths are walked first, then the blocks checked, then decoded.
  for (size_t i = 0; i < good.size(); i += 7) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x5A;
    try {
      if (codec.encoded_bytes(bad.data(), n, bad.size()) != bad.size()) continue;
      codec.check_codes(bad.data(), n);
      std::vector<float> y(n * dim);
      codec.decode(bad.data(), n, y.data());
    } catch (const Error&) {
    }
  }
}

// A block's length is read from its header, and checked against the bytes that are there before
// anything is read past them: the error names the block, the field and what was expected.
TEST(Cachegen, EncodedBytesRefusesBlocksPastTheCodes) {
  const size_t dim = 32, block = 16, n = 3 * block;
  const CachegenCodec codec(Stream::Values, dim, 4, block, 32);
  const std::vector<uint8_t> good = encoded(codec, smooth_stream(n, dim, 2), n);
  ASSERT_EQ(codec.encoded_bytes(good.data(), n, good.size()), good.size());
  const size_t last = good.size() - block_bytes(codec, good, 2).size();
  EXPECT_EQ(test::error_message<Error>([&] { codec.encoded_bytes(good.data(), n, good.size() - 1); }),
            "block 2 of 3 (tokens 32..47, from byte " + std::to_string(last) + " of " + std::to_string(good.size() - 1) +
                "): cachegen: corrupt value codes: field payload length = " +
                std::to_string(good.size() - last - 4 * codec.param_count() - 8) + "; the block needs " +
                std::to_string(good.size() - last) + " bytes; " + std::to_string(good.size() - 1 - last) +
                " are left (truncated)");
  // Cut inside the grids of the last block: its header is not there at all.
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec.encoded_bytes(good.data(), n, last + 3); }),
                  "block 2 of 3 (tokens 32..47, from byte " + std::to_string(last) + " of " +
                      std::to_string(last + 3) + "): cachegen: corrupt value codes: field header: the "
                      "block's grids and header need " + std::to_string(4 * codec.param_count() + 8) +
                      " bytes; 3 are left (truncated)");
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec.encoded_bytes(good.data(), n, 0); }),
                  "block 0 of 3 (tokens 0..15, from byte 0 of 0)");
  EXPECT_EQ(codec.encoded_bytes(good.data(), 0, 0), 0u);
}

// Inside a cache: codes plus the fp16 residual, bytes() exactly the coded blocks plus the fp16
// tail, and attention close to the decoded reference.
TEST(Cachegen, WorksInsideTheCache) {
  const SyntheticKV w = make_synthetic_kv(300, 2, 128, 4, 3, 1);
  KVCache cache("cachegen", LayerShape{2, 128, 0, 1});
  cache.append(TensorView::f32(w.keys.data(), {300, 2, 128}), TensorView::f32(w.values.data(), {300, 2, 128}));
  const std::vector<float> k = cache.decode_keys();
  double num = 0, den = 0;
  for (size_t i = 0; i < k.size(); ++i) num += (k[i] - w.keys[i]) * double(k[i] - w.keys[i]), den += w.keys[i] * double(w.keys[i]);
  EXPECT_LT(std::sqrt(num / den), 0.1);
  const CachegenCodec codec(Stream::Keys, 128, 4, 64, 32);
  size_t stored = 0;
  for (const CacheStream& s : cache.key_streams()) {
    EXPECT_EQ(s.encoded, 256u);
    EXPECT_EQ(codec.encoded_bytes(s.codes.data(), s.encoded, s.codes.size()), s.codes.size());
    stored += s.codes.size() + s.tail.size();
  }
  EXPECT_EQ(cache.key_bytes(), stored);
}

// Streams whose blocks' stated lengths do not add up to their codes are refused by restore (a
// damaged session file), naming the stream, the block and what was expected; the cache keeps
// what it held.
TEST(Cachegen, RestoreRefusesACorruptBlockLength) {
  const size_t h = 2, d = 32, n = 300;
  const std::vector<float> k = smooth_stream(n * h, d, 1), v = test::gaussian(n * h * d, 2);
  KVCache cache("cachegen:block=64", LayerShape{h, d, 0, 0});
  cache.append(TensorView::f32(k.data(), {n, h, d}), TensorView::f32(v.data(), {n, h, d}));
  KVCache copy("cachegen:block=64", LayerShape{h, d, 0, 0});
  copy.restore(cache.key_streams(), cache.value_streams());
  ASSERT_EQ(copy.bytes(), cache.bytes());
  const std::vector<float> before = copy.decode_keys();

  const CachegenCodec codec(Stream::Keys, d, 4, 64, 32);
  const std::vector<uint8_t>& codes = cache.key_streams()[1].codes;
  ASSERT_EQ(codec.rans_blocks(codes.data(), 256), 4u);
  const size_t last = codes.size() - block_bytes(codec, codes, 3).size(), length_at = last + 4 * d + 4;
  const uint32_t length = static_cast<uint32_t>(codes.size() - last - 4 * d - 8);
  auto with_length = [&](uint32_t l) {
    std::vector<CacheStream> keys = cache.key_streams();
    for (int b = 0; b < 4; ++b) keys[1].codes[length_at + b] = static_cast<uint8_t>(l >> (8 * b));
    return keys;
  };
  const std::string prefix = "cachegen:bits=4,block=64,group=32,residual=0: the key stream of KV head 1 has " +
                             std::to_string(codes.size()) + " code bytes for 256 tokens";
  // One byte longer: the last block runs past the codes.
  EXPECT_EQ(test::error_message<Error>([&] { copy.restore(with_length(length + 1), cache.value_streams()); }),
            prefix + ", whose blocks do not parse: block 3 of 4 (tokens 192..255, from byte " + std::to_string(last) +
                " of " + std::to_string(codes.size()) + "): cachegen: corrupt key codes: field payload length = " +
                std::to_string(length + 1) + "; the block needs " + std::to_string(codes.size() - last + 1) +
                " bytes; " + std::to_string(codes.size() - last) + " are left (truncated)");
  // One byte shorter: the blocks end before the codes do.
  EXPECT_EQ(test::error_message<Error>([&] { copy.restore(with_length(length - 1), cache.value_streams()); }),
            prefix + "; expected " + std::to_string(codes.size() - 1) + " (where its blocks' stated lengths end)");
  // A length beyond what any block holds.
  EXPECT_CONTAINS(test::error_message<Error>([&] { copy.restore(with_length(1u << 30), cache.value_streams()); }),
                  "field payload length = 1073741824; a rans block holds");
  EXPECT_EQ(copy.decode_keys(), before);
  EXPECT_EQ(copy.bytes(), cache.bytes());
}

// Streams in the layout cachegen stored before its blocks were compact (each block zero-padded
// to its worst case, a session file of an older build) are refused rather than misread.
TEST(Cachegen, RestoreRefusesPaddedBlocks) {
  const size_t h = 1, d = 32, n = 128;
  const std::vector<float> k = smooth_stream(n, d, 6), v = smooth_stream(n, d, 7);
  KVCache cache("cachegen", LayerShape{h, d, 0, 0});
  cache.append(TensorView::f32(k.data(), {n, h, d}), TensorView::f32(v.data(), {n, h, d}));
  const CachegenCodec codec(Stream::Keys, d, 4, 64, 32);
  std::vector<CacheStream> keys = cache.key_streams();
  ASSERT_EQ(codec.rans_blocks(keys[0].codes.data(), n), 2u);
  std::vector<uint8_t> padded;
  for (size_t b = 0; b < 2; ++b) {
    std::vector<uint8_t> one = block_bytes(codec, keys[0].codes, b);
    one.resize(codec.code_bytes(64), 0);
    padded.insert(padded.end(), one.begin(), one.end());
  }
  keys[0].codes = padded;
  KVCache copy("cachegen", LayerShape{h, d, 0, 0});
  EXPECT_CONTAINS(test::error_message<Error>([&] { copy.restore(keys, cache.value_streams()); }),
                  "the key stream of KV head 0 has " + std::to_string(padded.size()) +
                      " code bytes for 128 tokens, whose blocks do not parse: block 1 of 2");
  EXPECT_EQ(copy.tokens(), 0u);
}

// Eviction composed with cachegen keeps whole coded blocks: after every step each stored block is
// byte for byte what the codec writes for the tokens positions() names, and bytes() is exactly
// those blocks plus the fp16 tails.
TEST(Cachegen, EvictionKeepsExactCodedBlocks) {
  const size_t h = 2, d = 32, block = 16, tokens = 400;
  const std::vector<float> k = smooth_stream(tokens * h, d, 3), v = test::gaussian(tokens * h * d, 4);
  const std::vector<float> q = test::gaussian(tokens * 2 * h * d, 5);
  KVCache cache("h2o:budget=64+cachegen:block=16", LayerShape{h, d, 0, 0});
  const CachegenCodec keys(Stream::Keys, d, 4, block, 32), values(Stream::Values, d, 4, block, 32);
  std::vector<float> out(200 * 2 * h * d);
  size_t t = 0, blocks_dropped = 0;
  while (t < tokens) {
    const size_t n = t == 0 ? 200 : 1;
    cache.append(TensorView::f32(&k[t * h * d], {n, h, d}), TensorView::f32(&v[t * h * d], {n, h, d}));
    cache.attend_observed(TensorView::f32(&q[t * 2 * h * d], {n, 2 * h, d}), out.data());
    std::vector<size_t> encoded_before;
    for (const CacheStream& s : cache.key_streams()) encoded_before.push_back(s.encoded);
    cache.evict();
    t += n;
    for (size_t head = 0; head < h; ++head) blocks_dropped += (encoded_before[head] - cache.key_streams()[head].encoded) / block;
    size_t expect = 0;
    for (size_t head = 0; head < h; ++head) {
      const std::vector<int64_t> kept = cache.positions(head);
      for (const bool is_key : {true, false}) {
        const CacheStream& s = (is_key ? cache.key_streams() : cache.value_streams())[head];
        const CachegenCodec& codec = is_key ? keys : values;
        const std::vector<float>& x = is_key ? k : v;
        std::vector<uint8_t> written;
        for (size_t b = 0; b < s.encoded / block; ++b) {
          std::vector<float> rows(block * d);
          for (size_t i = 0; i < block; ++i)
            for (size_t c = 0; c < d; ++c) {
              const size_t p = static_cast<size_t>(kept[b * block + i]);
              rows[i * d + c] = f16_to_f32(f32_to_f16(x[(p * h + head) * d + c]));
            }
          const std::vector<uint8_t> one = encoded(codec, rows, block);
          written.insert(written.end(), one.begin(), one.end());
        }
        ASSERT_TRUE(s.codes == written) << "after " << t << " tokens, head " << head << (is_key ? " keys" : " values");
        expect += s.codes.size() + s.tail.size();
      }
    }
    ASSERT_EQ(cache.bytes(), expect) << "after " << t << " tokens";
  }
  std::printf("[ cachegen ] h2o eviction: %zu coded key blocks dropped over %zu tokens\n", blocks_dropped, tokens);
  EXPECT_GT(blocks_dropped, 10u);
}

// Real keys and values: the caches of the project's vq-hd128 model after 2048 tokens of the
// wikitext-2 test text, default parameters. bytes() is the coded blocks plus nothing else, and
// below what every block stored raw (the bound, and the fixed slots cachegen used to store)
// would take. Prints the bytes and bits per element (docs/methods/cachegen.md).
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
  size_t elements[2] = {0, 0}, raw[2] = {0, 0}, coded[2] = {0, 0}, rans[2] = {0, 0}, blocks[2] = {0, 0};
  size_t stored = 0;
  for (const KVCache& cache : s.caches()) {
    for (int k = 0; k < 2; ++k) {
      const CachegenCodec codec(k == 0 ? Stream::Keys : Stream::Values, cache.head_dim(), 4, 64, 32);
      for (const CacheStream& st : k == 0 ? cache.key_streams() : cache.value_streams()) {
        ASSERT_EQ(codec.encoded_bytes(st.codes.data(), st.encoded, st.codes.size()), st.codes.size());
        codec.check_codes(st.codes.data(), st.encoded);
        elements[k] += st.encoded * cache.head_dim();
        raw[k] += codec.code_bytes(st.encoded);
        coded[k] += st.codes.size();
        rans[k] += codec.rans_blocks(st.codes.data(), st.encoded);
        blocks[k] += st.encoded / 64;
        stored += st.codes.size() + st.tail.size();
      }
    }
  }
  EXPECT_EQ(s.kv_bytes(), stored);
  for (int k = 0; k < 2; ++k) {
    ASSERT_GT(elements[k], 0u);
    std::printf("[ cachegen ] vq-hd128 %s, 2048 tokens: %zu coded bytes (%.3f bits/element), raw blocks %zu (%.3f), %zu of %zu blocks rANS\n",
                k == 0 ? "keys" : "values", coded[k], 8.0 * double(coded[k]) / double(elements[k]), raw[k],
                8.0 * double(raw[k]) / double(elements[k]), rans[k], blocks[k]);
  }
  std::printf("[ cachegen ] vq-hd128, 2048 tokens: kv bytes %zu, fp16 %zu, %.3fx\n", s.kv_bytes(), s.kv_fp16_bytes(),
              double(s.kv_fp16_bytes()) / double(s.kv_bytes()));
  // Real keys are correlated across tokens: the coder saves bytes there.
  EXPECT_LT(coded[0], raw[0]);
  EXPECT_LE(coded[1], raw[1]);
}

}  // namespace
}  // namespace veloxquant::cachegen
