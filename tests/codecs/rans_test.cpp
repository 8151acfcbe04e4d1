// The rANS coder under CacheGen (src/codecs/cachegen/rans.h): byte-exact round trips on
// adversarial streams, coded size near the empirical entropy, and corrupt input refused with an
// Error, never a crash or a read out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "codecs/cachegen/rans.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant::cachegen {
namespace {

void expect_round_trip(const std::vector<uint8_t>& symbols, size_t alphabet = 256) {
  const std::vector<uint8_t> coded = rans_compress(symbols, alphabet);
  const std::vector<uint8_t> back = rans_decompress(coded);
  ASSERT_EQ(back, symbols);
}

double entropy_bits(const std::vector<uint8_t>& symbols) {
  std::vector<double> counts(256, 0);
  for (uint8_t s : symbols) counts[s] += 1;
  double bits = 0;
  for (double c : counts)
    if (c > 0) bits -= c * std::log2(c / static_cast<double>(symbols.size()));
  return bits;
}

// A two-sided geometric source around 0 (mod 256), like the code deltas CacheGen codes.
std::vector<uint8_t> skewed(size_t n, uint64_t seed, double p) {
  Rng rng(seed);
  std::vector<uint8_t> s(n);
  for (auto& x : s) {
    int k = 0;
    while (rng.uniform() > p && k < 100) ++k;
    x = static_cast<uint8_t>(rng.uniform() < 0.5 ? k : -k);
  }
  return s;
}

TEST(Rans, EmptyStream) {
  expect_round_trip({});
  EXPECT_EQ(rans_compress({}).size(), 2u);
}

TEST(Rans, OneSymbolRepeated100k) {
  const std::vector<uint8_t> s(100000, 173);
  expect_round_trip(s);
  // A symbol of probability 1 costs nothing: the header, the table and the 4-byte state remain.
  EXPECT_LT(rans_compress(s).size(), 300u);
}

TEST(Rans, SingleSymbol) {
  expect_round_trip({0});
  expect_round_trip({255});
  expect_round_trip({1}, 2);
}

TEST(Rans, AllSymbolsUniform) {
  std::vector<uint8_t> s;
  for (int r = 0; r < 40; ++r)
    for (int v = 0; v < 256; ++v) s.push_back(static_cast<uint8_t>(v));
  expect_round_trip(s);
  Rng rng(5);
  std::vector<uint8_t> u(50000);
  for (auto& x : u) x = static_cast<uint8_t>(rng.next_u64() & 0xFF);
  expect_round_trip(u);
  // Incompressible: about one byte per symbol plus the table.
  EXPECT_LT(rans_compress(u).size(), u.size() * 1.01 + 600);
}

TEST(Rans, RareSymbolInSkewedStream) {
  for (size_t pos : {size_t{0}, size_t{1}, size_t{5000}, size_t{99999}}) {
    std::vector<uint8_t> s(100000, 0);
    for (size_t i = 0; i < s.size(); i += 3) s[i] = 1;
    s[pos] = 200;
    expect_round_trip(s);
  }
}

TEST(Rans, RandomStreamsManySeeds) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    const size_t n = rng.next_u64() % 5000;
    const size_t alphabet = 1 + rng.next_u64() % 256;
    std::vector<uint8_t> s(n);
    const bool skew = seed % 2 == 0;
    for (auto& x : s) {
      const uint64_t r = rng.next_u64();
      x = static_cast<uint8_t>((skew ? (r % 7 == 0 ? r >> 8 : r % 3) : r >> 8) % alphabet);
    }
    SCOPED_TRACE(seed);
    expect_round_trip(s, alphabet);
  }
}

TEST(Rans, SmallAlphabetsAsTheCodecUsesThem) {
  for (size_t bits = 2; bits <= 8; ++bits) {
    const size_t alphabet = size_t{1} << bits;
    std::vector<uint8_t> s = skewed(20000, bits, 0.5);
    for (auto& x : s) x = static_cast<uint8_t>(x % alphabet);
    expect_round_trip(s, alphabet);
  }
}

TEST(Rans, CodedSizeNearEntropyOnSkewedSource) {
  for (double p : {0.3, 0.5, 0.8}) {
    const std::vector<uint8_t> s = skewed(200000, 42, p);
    const double h = entropy_bits(s) / 8;
    const double coded = static_cast<double>(rans_compress(s).size());
    EXPECT_LT(coded, 1.02 * h + 64) << "p " << p << ": entropy " << h << " bytes, coded " << coded;
    EXPECT_GT(coded, 0.99 * h) << "p " << p;  // a coder cannot beat the entropy of its model
  }
}

TEST(Rans, TruncatedStreamIsAnError) {
  const std::vector<uint8_t> s = skewed(5000, 7, 0.4);
  const std::vector<uint8_t> coded = rans_compress(s);
  for (size_t len = 0; len < coded.size(); ++len) {
    // A copy of exactly len bytes, so a read past its end is caught by AddressSanitizer builds.
    const std::vector<uint8_t> cut(coded.begin(), coded.begin() + static_cast<long>(len));
    EXPECT_THROW(rans_decompress(cut), Error) << len << " of " << coded.size() << " bytes";
  }
}

TEST(Rans, BadHeaderIsAnError) {
  const std::vector<uint8_t> coded = rans_compress(skewed(3000, 9, 0.4));
  std::vector<uint8_t> bad = coded;
  bad[0] = 0xFF, bad[1] = 0xFF;  // a huge symbol count
  EXPECT_THROW(rans_decompress(bad, 1 << 20), Error);
  std::vector<uint8_t> huge(12, 0xFF);  // a varint that never ends
  EXPECT_THROW(rans_decompress(huge), Error);
  // A frequency table that does not sum to 2^12.
  std::vector<uint8_t> table = {10, 3, 0x80, 0x10, 0, 0, 1};  // alphabet 4: 2048, 0, 0, 1
  EXPECT_THROW(rans_decompress(table), Error);
  try {
    rans_decompress(table);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("frequency table"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> trailing = rans_compress(std::vector<uint8_t>{});
  trailing.push_back(0);
  EXPECT_THROW(rans_decompress(trailing), Error);
}

TEST(Rans, FlippedBytesAreAnErrorOrAStreamOfTheRightLength) {
  const std::vector<uint8_t> s = skewed(4000, 11, 0.4);
  const std::vector<uint8_t> coded = rans_compress(s);
  Rng rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> bad = coded;
    bad[rng.next_u64() % bad.size()] ^= static_cast<uint8_t>(1 + rng.next_u64() % 255);
    try {
      const std::vector<uint8_t> back = rans_decompress(bad, 1 << 20);
      EXPECT_LE(back.size(), size_t{1} << 20);
    } catch (const Error&) {
    }
  }
}

TEST(Rans, FrequencyTableNormalises) {
  std::vector<uint32_t> counts(256, 1);
  counts[0] = 1000000;
  const FreqTable t = FreqTable::from_counts(counts.data(), 256);
  uint32_t sum = 0;
  for (size_t s = 0; s < 256; ++s) {
    EXPECT_GE(t.freq(s), 1u);
    sum += t.freq(s);
  }
  EXPECT_EQ(sum, kProbScale);
  std::vector<uint8_t> bytes;
  t.write(bytes);
  const uint8_t* p = bytes.data();
  const FreqTable back = FreqTable::read(p, bytes.data() + bytes.size(), 256);
  EXPECT_EQ(p, bytes.data() + bytes.size());
  for (size_t s = 0; s < 256; ++s) EXPECT_EQ(back.freq(s), t.freq(s));
}

}  // namespace
}  // namespace veloxquant::cachegen
