// PolarQuant: the polar transform is exactly invertible, the angle laws the codebooks are fitted
// to match rotated data, reconstruction error is what the codebooks predict and falls with bits,
// codes round-trip exactly, the rotated-frame score/accumulate match the decode-based defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

#include "codecs/polar/angle_codebooks.h"
#include "codecs/polar/polar_codec.h"
#include "codecs/polar/polar_transform.h"
#include "core/rng.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "test_data.h"

namespace veloxquant {
namespace {

using test::gaussian;

// Keys with the features that make plain quantization hard: a few large offset channels.
std::vector<float> outlier_keys(size_t n, size_t d, uint64_t seed) {
  std::vector<float> x = gaussian(n * d, seed);
  for (size_t t = 0; t < n; ++t) x[t * d + 7] = 8.0f + 3.0f * x[t * d + 7], x[t * d + 33] *= 6.0f;
  return x;
}

double relative_error(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) e += double(x[i] - y[i]) * (x[i] - y[i]), s += double(x[i]) * x[i];
  return e / s;
}

PolarConfig config(size_t dim, size_t levels, unsigned b1, unsigned b, uint64_t seed = 3) {
  PolarConfig c;
  c.dim = dim;
  c.levels = levels;
  c.level1_bits = b1;
  c.bits = b;
  c.seed = seed;
  return c;
}

std::vector<float> round_trip(const PolarCodec& codec, const std::vector<float>& x, size_t n) {
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> y(n * codec.dim());
  codec.decode(codes.data(), n, y.data());
  return y;
}

TEST(PolarTransform, InverseIsExactWithoutQuantization) {
  for (size_t levels = 1; levels <= 7; ++levels) {
    const size_t block = size_t{1} << levels;
    const std::vector<float> x = gaussian(block, 20 + levels, 3.0f);
    std::vector<float> angles(block - 1), c(block - 1), s(block - 1), y(block);
    std::vector<float> work = x;
    const float r = polar::forward(work.data(), levels, angles.data());
    for (size_t i = 0; i + 1 < block; ++i) c[i] = std::cos(angles[i]), s[i] = std::sin(angles[i]);
    polar::inverse(r, c.data(), s.data(), levels, y.data());
    double norm = 0;
    for (float v : x) norm += double(v) * v;
    EXPECT_NEAR(r, std::sqrt(norm), 1e-5 * std::sqrt(norm));
    for (size_t i = 0; i < block; ++i) EXPECT_NEAR(y[i], x[i], 1e-5 * std::sqrt(norm)) << levels << ":" << i;
  }
}

// The encoder's sign tests give each angle the codebook's code for the angle atan2 computes, and
// the same radii, every level and bit width; a code may differ only for an angle within float
// rounding of a boundary, or for a pair of zeros (any angle reconstructs it). The pairs include
// the axes and signed zeros, where atan2's convention (b = -0 with a < 0 is pi) decides the half.
TEST(PolarTransform, CellTestsGiveTheCodebooksCodes) {
  const size_t levels = 4, block = 16, blocks = 400;
  std::vector<float> x = gaussian(block * blocks, 31, 2.0f);
  const float axes[][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}, {-1, -0.0f}, {1, -0.0f}, {0, 0}, {-0.0f, -0.0f}};
  for (size_t i = 0; i < std::size(axes); ++i) x[2 * i] = axes[i][0], x[2 * i + 1] = axes[i][1];
  for (unsigned bits = 1; bits <= 5; ++bits) {
    for (size_t b = 0; b < blocks; ++b) {
      std::vector<float> ref(x.begin() + b * block, x.begin() + (b + 1) * block), cells = ref;
      std::vector<float> angles(block - 1), scratch(2 * block);
      const float radius = polar::forward(ref.data(), levels, angles.data());
      size_t a = 0;
      for (size_t l = 1; l <= levels; ++l) {
        const ScalarCodebook& cb = polar::angle_codebook(l, bits);
        const size_t pairs = polar::angles_at_level(levels, l);
        std::vector<uint8_t> codes(pairs);
        polar::forward_level_cells(cells.data(), pairs, polar::AngleCells(cb.boundaries), codes.data(),
                                   scratch.data());
        for (size_t j = 0; j < pairs; ++j, ++a) {
          if (codes[j] == cb.quantize(angles[a]) || cells[j] == 0) continue;
          double gap = 10;
          for (float beta : cb.boundaries) gap = std::min(gap, std::abs(double(angles[a]) - beta));
          EXPECT_LT(gap, 1e-5) << bits << " bits, block " << b << ", level " << l << ", pair " << j
                               << ": code " << int(codes[j]) << " for angle " << angles[a];
        }
      }
      EXPECT_NEAR(cells[0], radius, 1e-6f * radius) << bits << " bits, block " << b;
    }
  }
}

TEST(PolarTransform, AnglesOfGaussianVectorsFollowTheAnalyticLaws) {
  // Mean and variance of each level's angle over many Gaussian blocks against the moments of the
  // density the codebooks are fitted to (uniform, then proportional to sin^(2^(l-1)-1)(2 psi)).
  const size_t levels = 4, block = 16, samples = 20000;
  Rng rng(7);
  std::vector<double> sum(levels + 1, 0), sum2(levels + 1, 0), count(levels + 1, 0);
  std::vector<float> x(block), angles(block - 1);
  for (size_t n = 0; n < samples; ++n) {
    for (auto& v : x) v = static_cast<float>(rng.normal());
    polar::forward(x.data(), levels, angles.data());
    size_t a = 0;
    for (size_t l = 1; l <= levels; ++l)
      for (size_t j = 0; j < polar::angles_at_level(levels, l); ++j, ++a)
        sum[l] += angles[a], sum2[l] += double(angles[a]) * angles[a], count[l] += 1;
  }
  for (size_t l = 1; l <= levels; ++l) {
    double m0 = 0, m1 = 0, m2 = 0;
    const double hi = polar::angle_range_hi(l), h = hi / 100000;
    for (double psi = h / 2; psi < hi; psi += h) {
      const double p = polar::angle_density(l, psi);
      m0 += p, m1 += p * psi, m2 += p * psi * psi;
    }
    const double mean = m1 / m0, var = m2 / m0 - mean * mean;
    const double emp_mean = sum[l] / count[l], emp_var = sum2[l] / count[l] - emp_mean * emp_mean;
    EXPECT_NEAR(emp_mean, mean, 4 * std::sqrt(var / count[l])) << "level " << l;
    EXPECT_NEAR(emp_var / var, 1.0, 0.05) << "level " << l;
  }
}

TEST(PolarCodec, ErrorAtPaperSettingIsWhatTheCodebooksPredict) {
  // An angle error delta at a node of radius R moves its subtree by about R |delta|, and the
  // squared radii of every level sum to ||x||^2: the relative MSE is about the sum of the
  // per-level angle distortions (level 1 at 4 bits, levels 2-4 at 2 bits in the paper).
  const size_t d = 128, n = 2000;
  const PolarCodec codec(config(d, 4, 4, 2));
  double predicted = 0;
  for (size_t l = 1; l <= 4; ++l) predicted += polar::angle_codebook(l, l == 1 ? 4 : 2).distortion;
  for (const auto& x : {gaussian(n * d, 1), outlier_keys(n, d, 2)}) {
    const double err = relative_error(x, round_trip(codec, x, n));
    EXPECT_NEAR(err / predicted, 1.0, 0.15) << "error " << err << " predicted " << predicted;
    EXPECT_LT(err, 0.035);  // about 3.2% at 3.875 bits per coordinate
  }
}

TEST(PolarCodec, ErrorFallsWithBits) {
  const size_t d = 128, n = 1000;
  const std::vector<float> x = outlier_keys(n, d, 4);
  double last = 1e9;
  for (const auto& [b1, b] : {std::pair{2u, 1u}, {3u, 1u}, {4u, 2u}, {5u, 3u}, {6u, 4u}, {8u, 6u}}) {
    const double err = relative_error(x, round_trip(PolarCodec(config(d, 4, b1, b)), x, n));
    EXPECT_LT(err, 0.8 * last) << "bits " << b1 << "/" << b;
    last = err;
  }
  EXPECT_LT(last, 1e-3);
}

// Encodes x, decodes, encodes the decoded vectors again and expects the same bytes: decoding
// lands on the codebook's points, which encode to themselves. Returns the codes and decoding.
std::pair<std::vector<uint8_t>, std::vector<float>> expect_reencodes_to_the_same_bytes(
    const PolarCodec& codec, const std::vector<float>& x, size_t n) {
  std::vector<uint8_t> codes(codec.code_bytes(n)), again(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> y(x.size());
  codec.decode(codes.data(), n, y.data());
  codec.encode(y.data(), n, again.data());
  EXPECT_EQ(codes, again) << "head_dim " << codec.dim();
  return {codes, y};
}

TEST(PolarCodec, DecodeThenEncodeGivesTheSameBytes) {
  for (size_t d : {128, 96}) {  // 96: dense rotation instead of Hadamard
    const PolarCodec codec(config(d, 4, 4, 2));
    const size_t n = 64;
    expect_reencodes_to_the_same_bytes(codec, outlier_keys(n, d, 5), n);
  }
}

TEST(PolarCodec, RotatedFrameScoreAndAccumulateMatchDecodeBasedDefaults) {
  const size_t d = 128, n = 300, nq = 6;
  const PolarCodec codec(config(d, 4, 4, 2));
  const std::vector<float> x = outlier_keys(n, d, 6), q = gaussian(nq * d, 7), w = gaussian(nq * n, 8);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> s1(nq * n), s2(nq * n), o1(nq * d, 0.5f), o2(nq * d, 0.5f);
  codec.score(q.data(), nq, codes.data(), n, s1.data());
  codec.Codec::score(q.data(), nq, codes.data(), n, s2.data());
  for (size_t i = 0; i < s1.size(); ++i) EXPECT_NEAR(s1[i], s2[i], 1e-4 * (std::abs(s2[i]) + 12.0)) << i;
  codec.accumulate(w.data(), nq, codes.data(), n, o1.data());
  codec.Codec::accumulate(w.data(), nq, codes.data(), n, o2.data());
  for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-4 * (std::abs(o2[i]) + 12.0)) << i;
}

TEST(PolarCodec, BytesAreExactAdditiveAndDeterministic) {
  const PolarCodec codec(config(128, 4, 4, 2, 11));
  // 8 blocks of 16: 8 x (8 x 4 + 4 x 2 + 2 x 2 + 1 x 2) bits = 46 bytes, plus 8 fp16 radii.
  EXPECT_EQ(codec.code_bytes(1), 62u);
  EXPECT_EQ(codec.code_bytes(10), codec.code_bytes(3) + codec.code_bytes(7));
  const size_t n = 10;
  const std::vector<float> x = gaussian(n * 128, 9);
  std::vector<uint8_t> whole(codec.code_bytes(n)), parts(codec.code_bytes(n)), other(codec.code_bytes(n));
  codec.encode(x.data(), n, whole.data());
  codec.encode(x.data(), 3, parts.data());
  codec.encode(x.data() + 3 * 128, 7, parts.data() + codec.code_bytes(3));
  EXPECT_EQ(whole, parts);
  PolarCodec(config(128, 4, 4, 2, 11)).encode(x.data(), n, parts.data());
  EXPECT_EQ(whole, parts);
  PolarCodec(config(128, 4, 4, 2, 12)).encode(x.data(), n, other.data());
  EXPECT_NE(whole, other);
}

// The codec takes only block sizes that divide head_dim; the method caps levels at the factors of
// two in head_dim, so every even head_dim works and an odd one is a SpecError naming it.
TEST(PolarMethod, CapsLevelsAtTheFactorsOfTwoInHeadDim) {
  EXPECT_THROW(PolarCodec(config(100, 4, 4, 2)), SpecError);  // 100 % 16 != 0
  try {
    PolarCodec(config(100, 4, 4, 2));
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 100"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("levels=4"), std::string::npos) << e.what();
  }
  const Spec spec = parse_spec("polar");
  const auto bytes = [&](const std::string& text, size_t d) {
    const Spec s = parse_spec(text);
    return s.method->make(s.params, LayerShape{1, d, 0, 0}).key->code_bytes(1);
  };
  // Levels used: 128 -> 4 (62 bytes, the paper's 3.875 bits), 100 -> 2, 8 -> 3, 80 -> 4, 96 -> 4.
  EXPECT_EQ(bytes("polar", 128), 62u);
  EXPECT_EQ(bytes("polar", 100), bytes("polar:levels=2", 100));
  EXPECT_EQ(bytes("polar", 8), bytes("polar:levels=3", 8));
  EXPECT_EQ(bytes("polar", 80), PolarCodec(config(80, 4, 4, 2)).code_bytes(1));
  EXPECT_EQ(bytes("polar:levels=8", 128), bytes("polar:levels=7", 128));  // full recursion
  // head_dim 8, 3 levels: 4 x 4 + 2 x 2 + 1 x 2 = 22 angle bits in 3 bytes (levels share bytes),
  // plus one fp16 radius.
  EXPECT_EQ(bytes("polar", 8), 3u + 2u);
  // head_dim 80, 4 levels: 5 blocks x 46 bits = 230 bits in 29 bytes, plus 5 radii.
  EXPECT_EQ(bytes("polar", 80), 29u + 10u);
  for (size_t d : {7, 9, 101}) {
    try {
      (void)spec.method->make(spec.params, LayerShape{1, d, 0, 0});
      ADD_FAILURE() << "odd head_dim " << d << " was accepted";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("head_dim " + std::to_string(d)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(KVCache("polar:bits=9", LayerShape{1, 128, 0, 0}), SpecError);
}

// Levels that share bytes (head_dim 8 and 80 here) round-trip exactly and keep the rotated-frame
// kernels equal to decode-then-compute; the AVX-512 lane kernels read codes at any bit offset.
TEST(PolarCodec, SmallAndUnevenHeadDimsRoundTripAndMatchDecode) {
  using Shape = std::tuple<size_t, size_t, unsigned, unsigned>;  // head_dim, levels, bits1, bits
  const Shape shapes[] = {{8, 3, 4, 2}, {80, 4, 4, 2}, {2, 1, 4, 2}, {4, 2, 3, 2}, {24, 3, 3, 1}, {96, 5, 4, 2}};
  for (const auto& [d, levels, b1, b] : shapes) {
    const PolarCodec codec(config(d, levels, b1, b));
    const size_t n = 37, nq = 3;
    const std::vector<float> x = gaussian(n * d, 30 + d), q = gaussian(nq * d, 31 + d), w = gaussian(nq * n, 32 + d);
    const auto [codes, y] = expect_reencodes_to_the_same_bytes(codec, x, n);
    EXPECT_LT(relative_error(x, y), b1 >= 4 ? 0.08 : 0.4) << d;
    std::vector<float> s1(nq * n), s2(nq * n), o1(nq * d, 0.5f), o2(nq * d, 0.5f);
    codec.score(q.data(), nq, codes.data(), n, s1.data());
    codec.Codec::score(q.data(), nq, codes.data(), n, s2.data());
    for (size_t i = 0; i < s1.size(); ++i) ASSERT_NEAR(s1[i], s2[i], 1e-4 * (std::abs(s2[i]) + d)) << d << ", " << i;
    codec.accumulate(w.data(), nq, codes.data(), n, o1.data());
    codec.Codec::accumulate(w.data(), nq, codes.data(), n, o2.data());
    for (size_t i = 0; i < o1.size(); ++i) ASSERT_NEAR(o1[i], o2[i], 1e-4 * (std::abs(o2[i]) + 12.0)) << d << ", " << i;
  }
}

// Elements at the top of the fp16 range give block radii far beyond it; they are kept.
TEST(PolarMethod, BlockNormBeyondHalfRangeIsKept) {
  const PolarCodec codec(config(128, 4, 4, 2));
  std::vector<float> x(128, 6e4f), y(128);
  std::vector<uint8_t> codes(codec.code_bytes(1));
  codec.encode(x.data(), 1, codes.data());
  codec.decode(codes.data(), 1, y.data());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += double(y[i] - x[i]) * (y[i] - x[i]);
    den += double(x[i]) * x[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.3);
}

}  // namespace
}  // namespace veloxquant
