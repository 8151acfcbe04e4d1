// XXH64 against published check values (xxHash's own test vectors for "", "a", "abc") and values
// of the reference library (libxxhash 0.8.1) that reach every code path: the 32-byte stripe loop,
// the 8-, 4- and 1-byte tails, and a non-zero seed.
#include "core/xxhash64.h"

#include <gtest/gtest.h>

#include <string_view>

namespace veloxquant {
namespace {

uint64_t hash(std::string_view s, uint64_t seed = 0) {
  return xxhash64({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, seed);
}

TEST(XxHash64, MatchesPublishedCheckValues) {
  EXPECT_EQ(hash(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(hash("a"), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(hash("abc"), 0x44BC2CF5AD770999ull);
}

TEST(XxHash64, MatchesTheReferenceLibraryOnEveryPath) {
  EXPECT_EQ(hash("123456789"), 0x8CB841DB40E6AE83ull);                  // 8 + 1
  EXPECT_EQ(hash("message digest"), 0x066ED728FCEEB3BEull);             // 8 + 4 + 2
  EXPECT_EQ(hash("abcdefghijklmnopqrstuvwxyz"), 0xCFE1F278FA89835Cull);  // 3 x 8 + 2
  EXPECT_EQ(hash("Nobody inspects the spirit of the universe"), 0xFC3812E8EE27AF42ull);  // stripe
  EXPECT_EQ(hash("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            0xE04A477F19EE145Dull);  // two stripes + 16
}

TEST(XxHash64, MatchesTheReferenceLibraryWithASeed) {
  EXPECT_EQ(hash("abc", 1), 0xBEA9CA8199328908ull);
  EXPECT_EQ(hash("Nobody inspects the spirit of the universe", 0x9E3779B185EBCA87ull),
            0xDDAC9AB099AD87D7ull);
}

}  // namespace
}  // namespace veloxquant
