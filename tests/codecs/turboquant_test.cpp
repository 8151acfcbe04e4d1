// TurboQuant's own properties (arXiv 2504.19874): MSE distortion of unit vectors, unbiasedness
// and variance of the inner-product estimator, plus exact storage and fused-path parity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "codecs/turboquant/nearest_level.h"
#include "codecs/turboquant/turboquant_mse_codec.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "codecs/turboquant/turboquant_rvq_codec.h"
#include "core/rng.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {
using turboquant::TurboQuantMseCodec;
using turboquant::TurboQuantProdCodec;
using turboquant::TurboQuantRvqCodec;

std::vector<float> gaussian_rows(size_t n, size_t d, uint64_t seed, bool unit) {
  Rng rng(seed);
  std::vector<float> x(n * d);
  for (size_t t = 0; t < n; ++t) {
    double s = 0;
    for (size_t c = 0; c < d; ++c) {
      x[t * d + c] = static_cast<float>(rng.normal());
      s += x[t * d + c] * static_cast<double>(x[t * d + c]);
    }
    if (unit)
      for (size_t c = 0; c < d; ++c) x[t * d + c] = static_cast<float>(x[t * d + c] / std::sqrt(s));
  }
  return x;
}

double mean_squared_error(const Codec& codec, const std::vector<float>& x, size_t n) {
  const size_t d = codec.dim();
  std::vector<uint8_t> codes(codec.code_bytes(n));
  std::vector<float> y(n * d);
  codec.encode(x.data(), n, codes.data());
  codec.decode(codes.data(), n, y.data());
  double err = 0;
  for (size_t i = 0; i < n * d; ++i) err += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
  return err / static_cast<double>(n);
}

LayerCodecs make(const std::string& spec, size_t dim, uint64_t seed = 0, int layer = 0) {
  const Spec s = parse_spec(spec);
  return s.method->make(s.params, LayerShape{1, dim, layer, seed});
}

TEST(TurboQuant, VectorizedNearestLevelMatchesScalarQuantize) {
  Rng rng(21);
  for (unsigned bits = 0; bits <= 8; ++bits) {
    const ScalarCodebook cb = lloyd_max_sphere_coordinate(bits, 64);
    for (size_t n : {1, 15, 16, 17, 100}) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) {
        // Random values, plus values exactly on boundaries and beyond the outermost levels.
        x[i] = static_cast<float>(0.2 * rng.normal());
        if (i % 5 == 0 && !cb.boundaries.empty()) x[i] = cb.boundaries[i % cb.boundaries.size()];
        if (i % 11 == 3) x[i] = i % 2 ? 2.0f : -2.0f;
      }
      std::vector<uint8_t> codes(n);
      turboquant::nearest_levels(cb, x.data(), n, codes.data());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(codes[i], cb.quantize(x[i])) << bits << " bits, x " << x[i];
    }
  }
}

// Paper, Theorem 1: D_mse ~ 0.36, 0.117, 0.03, 0.009 at b = 1..4 (rounded values of the Lloyd-Max
// optimum 0.3634, 0.1175, 0.03454, 0.009497), and at most sqrt(3) pi / 2 * 4^-b for every b.
TEST(TurboQuantMse, UnitVectorDistortionMatchesPaper) {
  const double optimum[] = {0.3634, 0.1175, 0.03454, 0.009497};
  const size_t d = 128, n = 3000;
  const std::vector<float> x = gaussian_rows(n, d, 1, true);
  for (unsigned b = 1; b <= 4; ++b) {
    const TurboQuantMseCodec codec(d, b, 42);
    const double mse = mean_squared_error(codec, x, n);
    EXPECT_NEAR(mse, optimum[b - 1], 0.1 * optimum[b - 1]) << "bits " << b;
    EXPECT_LE(mse, std::sqrt(3.0) * std::numbers::pi / 2 * std::pow(4.0, -static_cast<double>(b)));
  }
  // Beyond the paper's table the distortion keeps falling about 4x per bit.
  double prev = 3;
  for (unsigned b = 1; b <= 8; ++b) {
    const double mse = mean_squared_error(TurboQuantMseCodec(d, b, 42), x, 500);
    EXPECT_LT(mse, prev / 3) << "bits " << b;
    prev = mse;
  }
}

TEST(TurboQuantMse, NormIsKeptForNonUnitVectors) {
  const size_t d = 64, n = 500;
  std::vector<float> x = gaussian_rows(n, d, 2, true), scaled = x;
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) scaled[t * d + c] *= static_cast<float>(0.01 + 3.0 * t);
  const TurboQuantMseCodec codec(d, 3, 9);
  std::vector<uint8_t> a(codec.code_bytes(n)), b(codec.code_bytes(n));
  codec.encode(x.data(), n, a.data());
  codec.encode(scaled.data(), n, b.data());
  std::vector<float> xa(n * d), xb(n * d);
  codec.decode(a.data(), n, xa.data());
  codec.decode(b.data(), n, xb.data());
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c)
      ASSERT_NEAR(xb[t * d + c], xa[t * d + c] * (0.01 + 3.0 * t), 1e-4 * (0.01 + 3.0 * t));
  // The zero vector decodes to zero.
  std::vector<float> zero(d, 0.0f), back(d, 1.0f);
  codec.encode(zero.data(), 1, a.data());
  codec.decode(a.data(), 1, back.data());
  for (float v : back) EXPECT_EQ(v, 0.0f);
}

// The rotated basis that prefill attends in: decode_in_basis then from_basis is decode bit for bit,
// and inner products with to_basis(q) equal those with q (the rotation is orthogonal), for the
// randomized Hadamard (64) and the dense rotation (80); turboquant_prod's sketch term included.
TEST(TurboQuant, DecodingInTheRotatedBasisKeepsInnerProducts) {
  for (size_t d : {size_t{64}, size_t{80}})
    for (const bool prod : {false, true}) {
      const size_t n = 40;
      const std::vector<float> x = gaussian_rows(n, d, 4, false), q = gaussian_rows(1, d, 5, false);
      const std::unique_ptr<Codec> owned = prod
                                               ? std::unique_ptr<Codec>(new TurboQuantProdCodec(d, 4, 11, 12))
                                               : std::unique_ptr<Codec>(new TurboQuantMseCodec(d, 4, 11));
      const Codec& codec = *owned;
      ASSERT_TRUE(codec.decodes_in_basis());
      std::vector<uint8_t> codes(codec.code_bytes(n));
      codec.encode(x.data(), n, codes.data());
      std::vector<float> natural(n * d), in_basis(n * d);
      codec.decode(codes.data(), n, natural.data());
      codec.decode_in_basis(codes.data(), n, in_basis.data());
      std::vector<float> rotated_q = q;
      codec.to_basis(rotated_q.data(), 1);
      for (size_t t = 0; t < n; ++t) {
        double a = 0, b = 0, scale = 0;
        for (size_t c = 0; c < d; ++c) {
          a += q[c] * static_cast<double>(natural[t * d + c]);
          b += rotated_q[c] * static_cast<double>(in_basis[t * d + c]);
          scale += std::fabs(q[c] * static_cast<double>(natural[t * d + c]));
        }
        EXPECT_NEAR(a, b, 1e-5 * scale) << "d " << d << " prod " << prod << " token " << t;
      }
      codec.from_basis(in_basis.data(), n);
      EXPECT_EQ(in_basis, natural) << "d " << d << " prod " << prod;
    }
}

// The MSE quantizer's inner products are biased: at 1 bit E[<x, Q^-1(Q(x))>] = 2/pi for unit x,
// the motivation for turboquant_prod.
TEST(TurboQuantMse, OneBitInnerProductsShrinkByTwoOverPi) {
  const size_t d = 128, n = 2000;
  const std::vector<float> x = gaussian_rows(n, d, 3, true);
  const TurboQuantMseCodec codec(d, 1, 5);
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> s(n);
  double mean = 0;
  for (size_t t = 0; t < n; ++t) {
    codec.score(x.data() + t * d, 1, codes.data() + codec.code_bytes(t), 1, s.data());
    mean += s[0];
  }
  EXPECT_NEAR(mean / n, 2 / std::numbers::pi, 0.01);
}

// Paper, Theorem 2: E[<y, x~>] = <y, x> and Var <= sqrt(3) pi^2 / d * ||y||^2 * 4^-b for unit x.
// The expectation is over the randomness of the quantizer (rotation and sketch), so each draw
// builds a fresh codec.
TEST(TurboQuantProd, InnerProductIsUnbiasedWithinThePaperVariance) {
  const size_t d = 128, draws = 1500;
  const std::vector<float> xy = gaussian_rows(2, d, 4, true);
  const float* x = xy.data();
  std::vector<float> y(xy.begin() + d, xy.end());
  for (size_t c = 0; c < d; ++c) y[c] = 0.6f * y[c] + 0.8f * x[c];  // correlated, like a real key
  double truth = 0, ynorm2 = 0;
  for (size_t c = 0; c < d; ++c) {
    truth += static_cast<double>(x[c]) * y[c];
    ynorm2 += static_cast<double>(y[c]) * y[c];
  }
  for (unsigned b = 1; b <= 4; ++b) {
    const ScalarCodebook cb = TurboQuantProdCodec::mse_codebook(b, d);
    double sum = 0, sum2 = 0;
    for (size_t k = 0; k < draws; ++k) {
      const TurboQuantProdCodec codec(d, b, cb, derive_seed(100 + b, {k, 1}), derive_seed(100 + b, {k, 2}));
      std::vector<uint8_t> codes(codec.code_bytes(1));
      codec.encode(x, 1, codes.data());
      float s;
      codec.score(y.data(), 1, codes.data(), 1, &s);
      const double e = s - truth;
      sum += e;
      sum2 += e * e;
    }
    const double mean = sum / draws, var = sum2 / draws - mean * mean;
    const double bound = std::sqrt(3.0) * std::numbers::pi * std::numbers::pi / d * ynorm2 *
                         std::pow(4.0, -static_cast<double>(b));
    EXPECT_LT(std::abs(mean), 4 * std::sqrt(var / draws)) << "bits " << b << " bias " << mean;
    EXPECT_LE(var, bound) << "bits " << b;
  }
}

TEST(TurboQuantProd, ReconstructionImprovesWithBits) {
  const size_t d = 128, n = 500;
  const std::vector<float> x = gaussian_rows(n, d, 5, true);
  double prev = 1e9;
  for (unsigned b = 1; b <= 6; ++b) {
    const double mse = mean_squared_error(TurboQuantProdCodec(d, b, 1, 2), x, n);
    EXPECT_LT(mse, prev) << "bits " << b;
    prev = mse;
  }
}

TEST(TurboQuantRvq, TwoStagesBeatOneAtTheSameBitsPerStage) {
  const size_t d = 128, n = 2000;
  const std::vector<float> x = gaussian_rows(n, d, 6, true);
  double prev = 1;
  for (unsigned b = 1; b <= 4; ++b) {
    const double rvq = mean_squared_error(TurboQuantRvqCodec(d, b, 3), x, n);
    const double one = mean_squared_error(TurboQuantMseCodec(d, b, 3), x, n);
    EXPECT_LT(rvq, 0.6 * one) << "bits " << b;
    EXPECT_LT(rvq, prev) << "bits " << b;
    prev = rvq;
  }
}

// decode(encode(x)) re-encodes to the same packed codes, and the re-encoded norm is the decoded
// vector's. Re-encoding quantizes c / ||c|| (c the decoded centroid vector), not c: ||c|| is
// 1 - D_mse / 2 on average but can drop to about 0.98 when a coordinate is clipped by the
// outermost level, so at 6+ bits, whose levels sit within 1-4% of a boundary, a rare token may
// move one level. Up to 5 bits every code must survive; beyond, nearly all.
// (Only turboquant_mse has this fixed point: rvq's second-stage levels can reach past the first
// stage's cell, and prod's decoded vector carries the QJL term.)
TEST(TurboQuantMse, PackedCodesSurviveDecodeAndReencode) {
  const size_t n = 200;
  for (size_t d : {128, 96, 40}) {
    const std::vector<float> x = gaussian_rows(n, d, 7, false);
    for (unsigned bits = 1; bits <= 8; ++bits) {
      const TurboQuantMseCodec codec(d, bits, 11);
      const size_t rec = codec.code_bytes(1);
      ASSERT_EQ(rec, 4 + (d * bits + 7) / 8);
      std::vector<uint8_t> a(codec.code_bytes(n)), b(a.size());
      std::vector<float> y(n * d);
      codec.encode(x.data(), n, a.data());
      codec.decode(a.data(), n, y.data());
      codec.encode(y.data(), n, b.data());
      size_t moved = 0;
      for (size_t t = 0; t < n; ++t) {
        // Bytes 0..3 are the f32 norm; the rest are the packed codes.
        moved += std::memcmp(a.data() + t * rec + 4, b.data() + t * rec + 4, rec - 4) != 0;
        float na, nb;
        std::memcpy(&na, a.data() + t * rec, 4);
        std::memcpy(&nb, b.data() + t * rec, 4);
        double ny = 0;
        for (size_t c = 0; c < d; ++c) ny += y[t * d + c] * static_cast<double>(y[t * d + c]);
        EXPECT_NEAR(nb, std::sqrt(ny), 1e-5 * na);
      }
      EXPECT_LE(moved, bits <= 5 ? 0u : n / 50) << "dim " << d << " bits " << bits;
    }
  }
}

TEST(TurboQuant, StoredBytesPerVector) {
  // d = 128: f32 norm + 128 codes. mse 4 bits: 4 + 64; prod 4 bits: 4 + 4 + 48 + 16;
  // rvq 1 bit per stage: 4 + 32.
  EXPECT_EQ(make("turboquant_mse:bits=4", 128).key->code_bytes(1), 68u);
  EXPECT_EQ(make("turboquant_mse:bits=1,vbits=3", 128).key->code_bytes(1), 20u);
  EXPECT_EQ(make("turboquant_mse:bits=1,vbits=3", 128).value->code_bytes(1), 52u);
  EXPECT_EQ(make("turboquant_prod:bits=4", 128).key->code_bytes(1), 72u);
  EXPECT_EQ(make("turboquant_prod:bits=1", 128).key->code_bytes(1), 24u);
  EXPECT_EQ(make("turboquant_rvq", 128).key->code_bytes(1), 36u);
  EXPECT_EQ(make("turboquant_rvq:bits=2", 128).key->code_bytes(1), 68u);
  // Odd widths pack without per-coordinate padding: 3 bits x 40 = 15 bytes.
  EXPECT_EQ(make("turboquant_mse:bits=3", 40).key->code_bytes(1), 19u);
  // Shared state: rotation signs (16 bytes at d = 128) + codebook, + the 128 x 128 f32 sketch.
  EXPECT_EQ(make("turboquant_mse:bits=4", 128).key->state_bytes(), 16u + 16 * 4);
  EXPECT_EQ(make("turboquant_prod:bits=4", 128).key->state_bytes(), 16u + 8 * 4 + 128 * 128 * 4);
  EXPECT_EQ(make("turboquant_rvq:bits=1", 128).key->state_bytes(), 16u + 2 * 2 * 4);
}

TEST(TurboQuant, CodeBytesAreAdditiveAndSlicesEncodeAlone) {
  for (const char* spec : {"turboquant_mse:bits=3", "turboquant_prod:bits=3", "turboquant_rvq:bits=3"}) {
    const LayerCodecs c = make(spec, 40);
    const Codec& k = *c.key;
    const std::vector<float> x = gaussian_rows(50, 40, 8, false);
    std::vector<uint8_t> whole(k.code_bytes(50)), parts(k.code_bytes(50));
    k.encode(x.data(), 50, whole.data());
    k.encode(x.data(), 17, parts.data());
    k.encode(x.data() + 17 * 40, 33, parts.data() + k.code_bytes(17));
    EXPECT_EQ(whole, parts) << spec;
    EXPECT_EQ(k.code_bytes(50), k.code_bytes(17) + k.code_bytes(33)) << spec;
  }
}

TEST(TurboQuant, SameSeedSameBytesDifferentStreamsDiffer) {
  const std::vector<float> x = gaussian_rows(20, 128, 9, false);
  for (const char* spec : {"turboquant_mse", "turboquant_prod", "turboquant_rvq"}) {
    auto bytes = [&](const Codec& c) {
      std::vector<uint8_t> b(c.code_bytes(20));
      c.encode(x.data(), 20, b.data());
      return b;
    };
    const LayerCodecs a = make(spec, 128, 5), b = make(spec, 128, 5);
    EXPECT_EQ(bytes(*a.key), bytes(*b.key)) << spec;
    EXPECT_EQ(bytes(*a.value), bytes(*b.value)) << spec;
    EXPECT_NE(bytes(*a.key), bytes(*make(spec, 128, 6).key)) << spec;
    EXPECT_NE(bytes(*a.key), bytes(*make(spec, 128, 5, 1).key)) << spec << ": layers share a rotation";
  }
  // Keys and values of one layer use different rotations.
  const LayerCodecs m = make("turboquant_mse", 128, 5);
  std::vector<uint8_t> kb(m.key->code_bytes(20)), vb(kb.size());
  m.key->encode(x.data(), 20, kb.data());
  m.value->encode(x.data(), 20, vb.data());
  EXPECT_NE(kb, vb);
}

// score() and accumulate() work on the codes (rotated queries, table lookups, one inverse
// rotation per call); they must equal decoding and computing in f32, for every code width,
// direct and unpacked layouts, odd dimensions, partial blocks and query counts that are not a
// multiple of the 4 processed together.
TEST(TurboQuant, FusedPathsEqualDecodeThenCompute) {
  std::vector<std::string> specs;
  for (int b = 1; b <= 8; ++b) specs.push_back("turboquant_mse:bits=" + std::to_string(b));
  for (int b = 1; b <= 6; ++b) specs.push_back("turboquant_prod:bits=" + std::to_string(b));
  for (int b = 1; b <= 4; ++b) specs.push_back("turboquant_rvq:bits=" + std::to_string(b));
  for (size_t d : {128, 64, 96, 40, 2}) {
    for (const auto& spec : specs) {
      const LayerCodecs c = make(spec, d, 3);
      const Codec& k = *c.key;
      ASSERT_TRUE(k.fused_score() && k.fused_accumulate());
      for (size_t n : {1, 300, 531}) {
        const std::vector<float> x = gaussian_rows(n, d, n + d, false);
        std::vector<uint8_t> codes(k.code_bytes(n));
        k.encode(x.data(), n, codes.data());
        for (size_t nq : {1, 4, 5}) {
          const std::vector<float> q = gaussian_rows(nq, d, 77 + nq, false);
          std::vector<float> fused(nq * n), ref(nq * n);
          k.score(q.data(), nq, codes.data(), n, fused.data());
          k.Codec::score(q.data(), nq, codes.data(), n, ref.data());
          double scale = 0;
          for (float v : ref) scale = std::max(scale, static_cast<double>(std::abs(v)));
          for (size_t i = 0; i < nq * n; ++i)
            ASSERT_NEAR(fused[i], ref[i], 1e-4 * scale) << spec << " d " << d << " n " << n << " nq " << nq;

          const std::vector<float> w = gaussian_rows(nq, n, 99 + nq, false);
          std::vector<float> acc(nq * d, 0.5f), acc_ref(nq * d, 0.5f);
          k.accumulate(w.data(), nq, codes.data(), n, acc.data());
          k.Codec::accumulate(w.data(), nq, codes.data(), n, acc_ref.data());
          scale = 0;
          for (float v : acc_ref) scale = std::max(scale, static_cast<double>(std::abs(v)));
          for (size_t i = 0; i < nq * d; ++i)
            ASSERT_NEAR(acc[i], acc_ref[i], 1e-4 * scale) << spec << " d " << d << " n " << n << " nq " << nq;
        }
      }
    }
  }
}

TEST(TurboQuant, RejectsShapesAndParametersItCannotHandle) {
  for (const char* name : {"turboquant_mse", "turboquant_prod", "turboquant_rvq"}) {
    try {
      make(name, 1);
      ADD_FAILURE() << name << " accepted head_dim 1";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("head_dim 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_spec("turboquant_mse:bits=0"), SpecError);
  EXPECT_THROW(parse_spec("turboquant_mse:bits=9"), SpecError);
  EXPECT_THROW(parse_spec("turboquant_prod:vbits=9"), SpecError);
  EXPECT_THROW(parse_spec("turboquant_rvq:bits=5"), SpecError);
}

// End to end through the cache: attention error falls about 2x per bit of keys and values. (On
// random data each value's error is independent, so the relative output error stays near the
// per-vector relative error sqrt(D_mse) plus the score errors: measured 0.27 at 3 bits, 0.16 at 4.)
TEST(TurboQuant, CacheAttentionErrorFallsWithBits) {
  const size_t d = 128, heads = 2, group = 4, tokens = 700;
  const std::vector<float> k = gaussian_rows(tokens * heads, d, 12, false);
  const std::vector<float> v = gaussian_rows(tokens * heads, d, 13, false);
  const std::vector<float> q = gaussian_rows(heads * group, d, 14, false);
  auto attend = [&](const std::string& spec) {
    KVCache cache(spec, LayerShape{heads, d, 0, 1});
    cache.append(TensorView::f32(k.data(), {tokens, heads, d}), TensorView::f32(v.data(), {tokens, heads, d}));
    std::vector<float> out(heads * group * d);
    cache.attend(TensorView::f32(q.data(), {1, heads * group, d}), out.data());
    return out;
  };
  const std::vector<float> exact = attend("fp16");
  auto error = [&](const std::string& spec) {
    const std::vector<float> out = attend(spec);
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      num += (out[i] - exact[i]) * static_cast<double>(out[i] - exact[i]);
      den += exact[i] * static_cast<double>(exact[i]);
    }
    return std::sqrt(num / den);
  };
  double prev = 1;
  for (int b = 2; b <= 8; ++b) {
    const std::string spec = "turboquant_mse:bits=" + std::to_string(b) + ",vbits=" + std::to_string(b);
    const double e = error(spec);
    EXPECT_LT(e, 0.75 * prev) << spec;
    EXPECT_LT(e, 2.8 * std::pow(0.5, b)) << spec;
    prev = e;
  }
  EXPECT_LT(error("turboquant_prod:bits=5,vbits=5"), 0.15);
  EXPECT_LT(error("turboquant_rvq:bits=3,vbits=3"), 0.15);
}

}  // namespace
}  // namespace veloxquant
