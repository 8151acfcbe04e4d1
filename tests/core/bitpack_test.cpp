#include "core/bitpack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace veloxquant {
namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kGuardBytes = 16;

std::vector<uint8_t> random_codes(size_t n, unsigned bits, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> c(n);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  for (auto& x : c) x = static_cast<uint8_t>(rng.next_u64() & mask);
  return c;
}

TEST(Bitpack, PackedBytesIsCeilOfBitCount) {
  EXPECT_EQ(packed_bytes(0, 3), 0u);
  EXPECT_EQ(packed_bytes(1, 1), 1u);
  EXPECT_EQ(packed_bytes(8, 1), 1u);
  EXPECT_EQ(packed_bytes(9, 1), 2u);
  EXPECT_EQ(packed_bytes(3, 3), 2u);   // 9 bits
  EXPECT_EQ(packed_bytes(8, 3), 3u);   // 24 bits
  EXPECT_EQ(packed_bytes(5, 5), 4u);   // 25 bits
  EXPECT_EQ(packed_bytes(128, 4), 64u);
  EXPECT_EQ(packed_bytes(7, 8), 7u);
  for (unsigned b = 1; b <= 8; ++b)
    for (size_t n = 0; n < 70; ++n) EXPECT_EQ(packed_bytes(n, b), (n * b + 7) / 8) << n << " " << b;
}

// Every width 1..8 and length 0..67 (whole vectors of codes and the code-by-code rest): packs
// random codes, unpacks them to floats with unpack(packed, n, bits, out) from an exactly sized
// buffer (the sanitizer builds catch a read past it) and expects value(code) for each,
// nothing written past n.
template <class Unpack, class Value>
void expect_float_unpacking(uint64_t seed, Unpack unpack, Value value) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    for (size_t n = 0; n <= 67; ++n) {
      const std::vector<uint8_t> codes = random_codes(n, bits, seed + 100 * bits + n);
      std::vector<uint8_t> packed(packed_bytes(n, bits));
      pack_bits(codes.data(), n, bits, packed.data());
      std::vector<float> got(n + 1, -1.0f);
      unpack(packed.data(), n, bits, got.data());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], value(codes[i])) << bits << " bits, n " << n << ", code " << i;
      EXPECT_EQ(got[n], -1.0f) << "wrote past code " << n << " (" << bits << " bits)";
    }
  }
}

TEST(Bitpack, FloatUnpackingGivesTheSameCodes) {
  expect_float_unpacking(7000, unpack_bits_f32, [](uint8_t code) { return float(code); });
}

// On a grid each code gives fma(code, step, min), in a vector of codes or not.
TEST(Bitpack, AffineUnpackingDequantizesEveryCode) {
  const float min = -1.375f, step = 0.0625f;
  expect_float_unpacking(
      9100,
      [&](const uint8_t* p, size_t n, unsigned bits, float* out) {
        unpack_affine_f32(p, n, bits, min, step, out);
      },
      [&](uint8_t code) { return std::fma(float(code), step, min); });
}

// Through a table each code gives scale * table[code] (tables of one or two vectors, or more).
TEST(Bitpack, TableUnpackingLooksUpEveryCode) {
  const float scale = -0.75f;
  std::vector<float> table(256);
  for (size_t e = 0; e < table.size(); ++e) table[e] = 0.5f + 1.25f * static_cast<float>(e * e % 37);
  expect_float_unpacking(
      9300,
      [&](const uint8_t* p, size_t n, unsigned bits, float* out) {
        unpack_table_f32(p, n, bits, table.data(), scale, out);
      },
      [&](uint8_t code) { return scale * table[code]; });
}

TEST(Bitpack, RoundTripEveryWidthManyLengthsNoOverrun) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    for (size_t n = 0; n <= 131; ++n) {
      const std::vector<uint8_t> codes = random_codes(n, bits, 1000 * bits + n);
      const size_t nb = packed_bytes(n, bits);
      std::vector<uint8_t> packed(nb + kGuardBytes, kGuard);
      pack_bits(codes.data(), n, bits, packed.data());
      for (size_t i = nb; i < packed.size(); ++i) {
        ASSERT_EQ(packed[i], kGuard) << "pack wrote past packed_bytes: bits=" << bits << " n=" << n;
      }
      // Unused high bits of the last byte are zero (deterministic bytes).
      if (nb > 0 && (n * bits) % 8 != 0) {
        const unsigned used = static_cast<unsigned>((n * bits) % 8);
        EXPECT_EQ(packed[nb - 1] >> used, 0) << "bits=" << bits << " n=" << n;
      }
      std::vector<uint8_t> back(n + kGuardBytes, kGuard);
      unpack_bits(packed.data(), n, bits, back.data());
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(back[i], codes[i]) << "bits=" << bits << " n=" << n << " i=" << i;
      }
      for (size_t i = n; i < back.size(); ++i) {
        ASSERT_EQ(back[i], kGuard) << "unpack wrote past n: bits=" << bits << " n=" << n;
      }
    }
  }
}

TEST(Bitpack, AllOnesAndZerosRoundTrip) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    const size_t n = 37;
    for (uint8_t v : {uint8_t{0}, static_cast<uint8_t>((1u << bits) - 1)}) {
      std::vector<uint8_t> codes(n, v), packed(packed_bytes(n, bits)), back(n);
      pack_bits(codes.data(), n, bits, packed.data());
      unpack_bits(packed.data(), n, bits, back.data());
      EXPECT_EQ(back, codes) << "bits=" << bits;
    }
  }
}

TEST(Bitpack, UnpackReadsOnlyPackedBytes) {
  // Unpacking from a buffer of exactly packed_bytes must not need more input: place the packed
  // data at the very end of a vector and compare.
  for (unsigned bits = 1; bits <= 8; ++bits) {
    for (size_t n : {1u, 5u, 13u, 64u, 99u}) {
      const auto codes = random_codes(n, bits, 7 * bits + n);
      std::vector<uint8_t> packed(packed_bytes(n, bits));
      pack_bits(codes.data(), n, bits, packed.data());
      std::vector<uint8_t> exact(packed.begin(), packed.end());  // exactly-sized allocation
      std::vector<uint8_t> back(n);
      unpack_bits(exact.data(), n, bits, back.data());
      EXPECT_EQ(back, codes) << "bits=" << bits << " n=" << n;
    }
  }
}

TEST(Bitpack, LayoutIsLittleEndianBitStream) {
  // 3-bit codes 5, 3, 7, 1, 6: bits (LSB first) 101 110 111 100 011
  // stream value = 5 | 3<<3 | 7<<6 | 1<<9 | 6<<12 = 5 + 24 + 448 + 512 + 24576 = 25565 = 0x63DD
  const uint8_t codes[5] = {5, 3, 7, 1, 6};
  uint8_t packed[4] = {kGuard, kGuard, kGuard, kGuard};
  ASSERT_EQ(packed_bytes(5, 3), 2u);
  pack_bits(codes, 5, 3, packed);
  EXPECT_EQ(packed[0], 0xDD);
  EXPECT_EQ(packed[1], 0x63);
  EXPECT_EQ(packed[2], kGuard);

  // 1-bit: code i is bit i.
  const uint8_t bits1[10] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 1};
  uint8_t p1[3] = {kGuard, kGuard, kGuard};
  pack_bits(bits1, 10, 1, p1);
  EXPECT_EQ(p1[0], 0b10111001);
  EXPECT_EQ(p1[1], 0b10);
  EXPECT_EQ(p1[2], kGuard);

  // 4-bit: low nibble first.
  const uint8_t nib[3] = {0x1, 0xA, 0xF};
  uint8_t p4[3] = {kGuard, kGuard, kGuard};
  pack_bits(nib, 3, 4, p4);
  EXPECT_EQ(p4[0], 0xA1);
  EXPECT_EQ(p4[1], 0x0F);
  EXPECT_EQ(p4[2], kGuard);

  // 5-bit codes straddle byte boundaries: 31 | 0<<5 | 17<<10 = 31 + 17408 = 17439 = 0x441F
  const uint8_t five[3] = {31, 0, 17};
  uint8_t p5[3] = {kGuard, kGuard, kGuard};
  pack_bits(five, 3, 5, p5);
  EXPECT_EQ(p5[0], 0x1F);
  EXPECT_EQ(p5[1], 0x44);
  EXPECT_EQ(p5[2], kGuard);

  // 8-bit is a plain copy.
  const uint8_t eight[3] = {0x00, 0x80, 0xFF};
  uint8_t p8[4] = {kGuard, kGuard, kGuard, kGuard};
  pack_bits(eight, 3, 8, p8);
  EXPECT_EQ(p8[0], 0x00);
  EXPECT_EQ(p8[1], 0x80);
  EXPECT_EQ(p8[2], 0xFF);
  EXPECT_EQ(p8[3], kGuard);
}

TEST(Bitpack, MatchesGenericBitStreamReference) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    const size_t n = 53;
    const auto codes = random_codes(n, bits, 99 + bits);
    std::vector<uint8_t> ref(packed_bytes(n, bits), 0);
    for (size_t i = 0; i < n; ++i)
      for (unsigned b = 0; b < bits; ++b) {
        const size_t pos = i * bits + b;
        if ((codes[i] >> b) & 1u) ref[pos / 8] = static_cast<uint8_t>(ref[pos / 8] | (1u << (pos % 8)));
      }
    std::vector<uint8_t> packed(ref.size());
    pack_bits(codes.data(), n, bits, packed.data());
    EXPECT_EQ(packed, ref) << "bits=" << bits;
  }
}

TEST(Bitpack, StreamsAppendAtByteBoundaries) {
  // Codecs append blocks: packing [a, b) separately equals packing whole when a*bits % 8 == 0.
  for (unsigned bits = 1; bits <= 8; ++bits) {
    const size_t a = 16, n = 40;
    const auto codes = random_codes(n, bits, 555 + bits);
    std::vector<uint8_t> whole(packed_bytes(n, bits)), split(packed_bytes(n, bits));
    pack_bits(codes.data(), n, bits, whole.data());
    pack_bits(codes.data(), a, bits, split.data());
    pack_bits(codes.data() + a, n - a, bits, split.data() + packed_bytes(a, bits));
    EXPECT_EQ(whole, split) << "bits=" << bits;
  }
}

}  // namespace
}  // namespace veloxquant
