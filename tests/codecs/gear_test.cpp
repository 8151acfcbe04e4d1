// GEAR (Kang et al., arXiv 2403.05527): base min/max quantization + low-rank residual + sparse
// largest residual entries. Rank 0 and sparsity 0 are the base quantizer bit for bit; each part
// lowers the error; the sparse entries come back exact; the byte count and the corrupt-code
// checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "codecs/codec_test_helpers.h"
#include "codecs/gear/gear_codec.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "core/bitpack.h"
#include "core/rng.h"
#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::gear {
namespace {

using test::round_trip;
using test::sq_error;

GearConfig config(unsigned bits, size_t rank, double sparsity, size_t block = 64) {
  GearConfig c;
  c.bits = bits;
  c.rank = rank;
  c.sparsity = sparsity;
  c.block = block;
  return c;
}

// One block of the synthetic workload (outlier key channels or Student-t values) plus a rank-3
// component and a few large isolated entries: what GEAR's three parts are made for.
std::vector<float> low_rank_plus_outliers(size_t n, size_t d, bool keys, uint64_t seed) {
  const SyntheticKV w = make_synthetic_kv(n, 1, d, 1, 1, seed);
  std::vector<float> x = keys ? w.keys : w.values;
  Rng rng(seed + 1);
  for (int j = 0; j < 3; ++j) {
    std::vector<double> u(n), v(d);
    for (auto& e : u) e = rng.normal();
    for (auto& e : v) e = rng.normal();
    for (size_t t = 0; t < n; ++t)
      for (size_t c = 0; c < d; ++c) x[t * d + c] += static_cast<float>(0.8 * u[t] * v[c] / (j + 1));
  }
  for (int i = 0; i < 40; ++i) x[rng.next_u64() % (n * d)] += static_cast<float>(15.0 * rng.normal());
  return x;
}

class GearBits : public ::testing::TestWithParam<unsigned> {};

// The paper's property: without the low-rank and sparse parts GEAR is its base quantizer. The
// base is KIVI's grid: keys per channel over the block (KIVI keys with group = block), values
// per token over all channels (KIVI values with group = head_dim); decode agrees bit for bit.
TEST_P(GearBits, RankZeroSparsityZeroIsExactlyTheBaseQuantizer) {
  const unsigned bits = GetParam();
  for (size_t d : {size_t{128}, size_t{80}, size_t{8}}) {
    const size_t block = 64, n = 3 * block;
    const std::vector<float> k = low_rank_plus_outliers(n, d, true, 3 + d);
    const std::vector<float> v = low_rank_plus_outliers(n, d, false, 4 + d);
    const GearCodec gk(d, Axis::PerChannel, config(bits, 0, 0.0, block));
    const GearCodec gv(d, Axis::PerToken, config(bits, 0, 0.0, block));
    const kivi::KiviKeyCodec kk(d, bits, block);
    const kivi::KiviValueCodec kv(d, bits, d);
    const std::vector<float> yk = round_trip(gk, k, n), rk = round_trip(kk, k, n);
    const std::vector<float> yv = round_trip(gv, v, n), rv = round_trip(kv, v, n);
    EXPECT_EQ(0, std::memcmp(yk.data(), rk.data(), yk.size() * sizeof(float))) << "keys, head_dim " << d;
    EXPECT_EQ(0, std::memcmp(yv.data(), rv.data(), yv.size() * sizeof(float))) << "values, head_dim " << d;
    // Nothing but the grids and the codes is stored.
    EXPECT_EQ(gk.code_bytes(n), kk.code_bytes(n));
    EXPECT_EQ(gv.code_bytes(n), 3 * (4 * block + block * d * bits / 8));
  }
}

// Each rank and each sparse entry lowers the error on a low-rank-plus-outlier block.
TEST_P(GearBits, ErrorFallsAsRankGrows) {
  const unsigned bits = GetParam();
  const size_t d = 128, n = 64;
  for (const Axis axis : {Axis::PerChannel, Axis::PerToken}) {
    const std::vector<float> x = low_rank_plus_outliers(n, d, axis == Axis::PerChannel, 11);
    for (double sparsity : {0.0, 0.02}) {
      double previous = INFINITY;
      for (size_t rank : {0, 1, 2, 4}) {
        const double e = sq_error(x, round_trip(GearCodec(d, axis, config(bits, rank, sparsity)), x, n));
        EXPECT_LT(e, previous) << "rank " << rank << ", sparsity " << sparsity
                               << (axis == Axis::PerChannel ? ", keys" : ", values");
        previous = e;
      }
    }
  }
}

TEST_P(GearBits, ErrorFallsAsSparsityGrows) {
  const unsigned bits = GetParam();
  const size_t d = 128, n = 64;
  for (const Axis axis : {Axis::PerChannel, Axis::PerToken}) {
    const std::vector<float> x = low_rank_plus_outliers(n, d, axis == Axis::PerChannel, 12);
    for (size_t rank : {0, 4}) {
      double previous = INFINITY;
      for (double sparsity : {0.0, 0.01, 0.05}) {
        const double e = sq_error(x, round_trip(GearCodec(d, axis, config(bits, rank, sparsity)), x, n));
        EXPECT_LT(e, previous) << "sparsity " << sparsity << ", rank " << rank
                               << (axis == Axis::PerChannel ? ", keys" : ", values");
        previous = e;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bits, GearBits, ::testing::Values(2u, 4u));

// The sparse part holds exactly the k largest entries of the base quantizer's residual, and those
// elements decode to the input up to one fp16 rounding of their correction; without a low-rank
// part every other element is the base quantizer's.
// The fused paths give the scores and weighted sums of the decoded vectors, for keys (grids per
// channel) and values (per token), with every part present, over several blocks and queries.
TEST_P(GearBits, FusedScoreAndAccumulateMatchTheDecodedVectors) {
  const size_t d = 64, n = 128, nq = 3;
  for (bool keys : {true, false}) {
    const GearCodec codec(d, keys ? Axis::PerChannel : Axis::PerToken, config(GetParam(), 4, 0.05));
    const std::vector<float> x = low_rank_plus_outliers(n, d, keys, 31);
    std::vector<uint8_t> codes(codec.code_bytes(n));
    codec.encode(x.data(), n, codes.data());
    std::vector<float> decoded(n * d), q(nq * d), w(nq * n);
    codec.decode(codes.data(), n, decoded.data());
    Rng rng(32);
    for (auto& e : q) e = static_cast<float>(rng.normal());
    for (auto& e : w) e = static_cast<float>(rng.uniform());
    std::vector<float> scores(nq * n), sums(nq * d, 0.5f);
    codec.score(q.data(), nq, codes.data(), n, scores.data());
    codec.accumulate(w.data(), nq, codes.data(), n, sums.data());
    // base + sum_j a[j * sa] b[j * sb] in double, and the same sum of magnitudes (the bound's scale).
    auto product = [](double base, const float* a, size_t sa, const float* b, size_t sb, size_t len) {
      double sum = base, magnitude = std::fabs(base);
      for (size_t j = 0; j < len; ++j) {
        sum += a[j * sa] * static_cast<double>(b[j * sb]);
        magnitude += std::fabs(a[j * sa] * static_cast<double>(b[j * sb]));
      }
      return std::pair{sum, magnitude};
    };
    for (size_t i = 0; i < nq; ++i) {
      for (size_t t = 0; t < n; ++t) {
        const auto [want, scale] = product(0.0, &q[i * d], 1, &decoded[t * d], 1, d);
        ASSERT_NEAR(scores[i * n + t], want, 1e-5 * scale)
            << (keys ? "keys" : "values") << " query " << i << " token " << t;
      }
      for (size_t c = 0; c < d; ++c) {
        const auto [want, scale] = product(0.5, &w[i * n], 1, &decoded[c], d, n);
        ASSERT_NEAR(sums[i * d + c], want, 1e-5 * scale)
            << (keys ? "keys" : "values") << " query " << i << " channel " << c;
      }
    }
  }
}

TEST(Gear, SparsePartRestoresLargestResidualEntries) {
  const size_t d = 128, n = 64, total = n * d;
  for (const Axis axis : {Axis::PerChannel, Axis::PerToken}) {
    const std::vector<float> x = low_rank_plus_outliers(n, d, axis == Axis::PerChannel, 21);
    const std::vector<float> base = round_trip(GearCodec(d, axis, config(2, 0, 0.0)), x, n);
    std::vector<uint32_t> order(total);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t i, uint32_t j) {
      return std::fabs(static_cast<double>(x[i]) - base[i]) > std::fabs(static_cast<double>(x[j]) - base[j]);
    });
    for (size_t rank : {0, 4}) {
      const GearCodec codec(d, axis, config(2, rank, 0.02));
      const size_t k = codec.sparse_count();
      ASSERT_EQ(k, 164u);  // round(0.02 * 64 * 128)
      std::vector<uint32_t> top(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
      std::sort(top.begin(), top.end());
      std::vector<uint8_t> codes(codec.code_bytes(n));
      codec.encode(x.data(), n, codes.data());
      std::vector<float> y(total);
      codec.decode(codes.data(), n, y.data());
      std::vector<bool> sparse(total, false);
      for (size_t i = 0; i < k; ++i) {
        uint16_t pos;
        std::memcpy(&pos, codes.data() + codec.index_offset() + 2 * i, 2);
        ASSERT_EQ(pos, top[i]) << "sparse entry " << i << ", rank " << rank;
        sparse[pos] = true;
        const double residual = std::fabs(static_cast<double>(x[pos]) - base[pos]);
        EXPECT_LE(std::fabs(y[pos] - x[pos]), residual * 1e-3 + 1e-6 * std::fabs(x[pos]))
            << "position " << pos << ", rank " << rank;
      }
      if (rank == 0) {
        for (size_t i = 0; i < total; ++i) {
          if (!sparse[i]) {
            ASSERT_EQ(y[i], base[i]) << "position " << i;
          }
        }
      }
    }
  }
}

// code_bytes = blocks x (fp16 scale + min per grid, the packed codes, fp16 factors, sparse
// index + fp16 value), for both streams and several layouts.
TEST(Gear, CodeBytesMatchTheFormula) {
  struct Case { size_t d, block; unsigned bits; size_t rank; double sparsity; };
  for (const Case& c : {Case{128, 64, 2, 4, 0.02}, Case{128, 64, 4, 16, 0.1}, Case{8, 16, 2, 4, 0.02},
                        Case{80, 1024, 2, 2, 0.05}, Case{128, 32, 2, 0, 0.0}, Case{96, 128, 4, 8, 0.001}}) {
    for (const Axis axis : {Axis::PerChannel, Axis::PerToken}) {
      const GearCodec codec(c.d, axis, config(c.bits, c.rank, c.sparsity, c.block));
      const size_t grids = axis == Axis::PerChannel ? c.d : c.block;
      const size_t total = c.block * c.d;
      const size_t k = static_cast<size_t>(std::llround(c.sparsity * static_cast<double>(total)));
      const size_t index_bytes = total <= 65536 ? 2 : 4;
      const size_t r = std::min({c.rank, c.block, c.d});
      const size_t block = 4 * grids + (total * c.bits + 7) / 8 + 2 * r * (c.block + c.d) + k * (index_bytes + 2);
      EXPECT_EQ(codec.code_bytes(c.block), block) << "head_dim " << c.d << ", block " << c.block;
      EXPECT_EQ(codec.code_bytes(5 * c.block), 5 * block);
      EXPECT_EQ(codec.state_bytes(), 0u);
    }
  }
  // The defaults at head_dim 128, per 64-token block: keys 512 + 2048 + 1536 + 164 x 4 bytes,
  // values 256 + 2048 + 1536 + 656.
  EXPECT_EQ(GearCodec(128, Axis::PerChannel, GearConfig{}).code_bytes(64), 4752u);
  EXPECT_EQ(GearCodec(128, Axis::PerToken, GearConfig{}).code_bytes(64), 4496u);
}

// Codes from a session file: an index out of range or out of order, a non-finite factor, sparse
// value or grid are refused with an Error naming the field; what encode() wrote passes.
TEST(Gear, CorruptCodesAreRefused) {
  const size_t d = 128, n = 128;
  const std::vector<float> x = low_rank_plus_outliers(n, d, true, 31);
  for (const Axis axis : {Axis::PerChannel, Axis::PerToken}) {
    const GearCodec codec(d, axis, GearConfig{});
    std::vector<uint8_t> good(codec.code_bytes(n));
    codec.encode(x.data(), n, good.data());
    EXPECT_NO_THROW(codec.check_codes(good.data(), n));
    const size_t second = codec.block_bytes();  // corrupt the second block
    auto expect_refused = [&](size_t offset, uint16_t value, const std::string& field) {
      std::vector<uint8_t> bad = good;
      std::memcpy(bad.data() + second + offset, &value, 2);
      try {
        codec.check_codes(bad.data(), n);
        ADD_FAILURE() << field << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("block 1"), std::string::npos) << e.what();
      }
    };
    expect_refused(codec.index_offset() + 2 * 7, static_cast<uint16_t>(n / 2 * d), "sparse index 7");  // out of range
    expect_refused(codec.index_offset() + 2 * 7, 0, "sparse index 7");       // not increasing
    expect_refused(codec.values_offset() + 2 * 3, 0x7C00, "sparse value 3");  // +inf
    expect_refused(codec.factors_offset() + 2 * 5, 0x7E00, "low-rank factor A element 5");  // NaN
    expect_refused(2 * 2, 0xBC00, "grid 2");                                  // step -1
    expect_refused(2 * (codec.grid_count() + 2), 0xFC00, "grid 2");           // minimum -inf
  }
}

// Bad parameters are SpecErrors naming the parameter and what is allowed.
TEST(Gear, BadParametersAreNamed) {
  test::expect_refused_naming("gear:bits=3", "bits");
  test::expect_refused_naming("gear:bits=8", "bits");
  test::expect_refused_naming("gear:rank=17", "rank");
  test::expect_refused_naming("gear:sparsity=0.2", "sparsity");
  test::expect_refused_naming("gear:sparsity=-0.01", "sparsity");
  test::expect_refused_naming("gear:block=24", "block");
  test::expect_refused_naming("gear:block=8", "block");
  test::expect_refused_naming("gear:block=2048", "block");
  test::expect_refused_naming("gear:rank=16", "rank", LayerShape{1, 8, 0, 0});  // rank above head_dim 8
  EXPECT_NO_THROW(KVCache("gear:bits=4,rank=16,sparsity=0.1,block=1024,residual=0", LayerShape{1, 128, 0, 0}));
}

// In the cache: GEAR at its defaults stores keys and values closer to the input than KIVI's
// 2-bit base alone, and the fp16 window keeps the recent tokens exact.
TEST(Gear, CacheErrorBelowItsBaseQuantizer) {
  const size_t tokens = 512, heads = 2, d = 128;
  const SyntheticKV w = make_synthetic_kv(tokens, heads, d, 2, 1, 5);
  auto errors = [&](const std::string& spec) { return test::cache_errors(spec, w); };
  const auto [gk, gv] = errors("gear");
  const auto [bk, bv] = errors("gear:rank=0,sparsity=0");
  EXPECT_LT(gk, 0.7 * bk);
  EXPECT_LT(gv, 0.7 * bv);
}

}  // namespace
}  // namespace veloxquant::gear
