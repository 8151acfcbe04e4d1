// spectral: the properties SpectralQuant rests on. Reverse water-filling keeps the average bits,
// favours the large eigenvalues and is the closed-form solution where that one is integral; the
// calibrated rotation is orthogonal, so rotating queries and keys alike preserves q . k; scores
// from the codes equal the decoded keys' products; on keys whose variance sits in a few
// directions the eigenbasis beats TurboQuant's random rotation at equal bytes; the bytes are the
// documented ones; missing, mismatched or damaged calibration and corrupt codes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "codec_test_helpers.h"
#include "codecs/spectral/bit_allocation.h"
#include "codecs/spectral/spectral_fit.h"
#include "codecs/spectral/spectral_key_codec.h"
#include "codecs/turboquant/turboquant_mse_codec.h"
#include "core/rotation.h"
#include "test_data.h"
#include "veloxquant/calibration.h"
#include "veloxquant/gguf.h"

namespace veloxquant {
namespace {

using spectral::SpectralKeyCodec;

// The continuous reverse water-filling solution: bits_j = max(0, log2(lambda_j / theta) / 2) with
// the water level theta found by bisection so that the bits sum to `total`.
std::vector<double> closed_form_bits(const std::vector<double>& lambda, double total) {
  auto sum_at = [&](double log_theta) {
    double s = 0;
    for (double l : lambda) s += std::max(0.0, (std::log2(l) - log_theta) / 2);
    return s;
  };
  double lo = -200, hi = 200;  // log2 theta
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (sum_at(mid) > total ? lo : hi) = mid;
  }
  std::vector<double> bits;
  for (double l : lambda) bits.push_back(std::max(0.0, (std::log2(l) - lo) / 2));
  return bits;
}

TEST(Spectral, WaterFillingMatchesTheClosedFormWhereItIsIntegral) {
  for (const auto& [lambda, total] : {std::pair{std::vector<double>{256, 16, 1, 1.0 / 16}, size_t{6}},
                                      std::pair{std::vector<double>{64, 16, 4, 1, 0.5, 0.1}, size_t{6}},
                                      std::pair{std::vector<double>{1024, 64, 64, 4, 1, 1, 0.25, 0.01}, size_t{12}}}) {
    const std::vector<double> want = closed_form_bits(lambda, static_cast<double>(total));
    const std::vector<unsigned> got = spectral::water_fill_bits(lambda, total);
    ASSERT_EQ(got.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) {
      ASSERT_NEAR(want[j], std::round(want[j]), 1e-9) << "the example's closed form is integral";
      EXPECT_EQ(got[j], static_cast<unsigned>(std::lround(want[j]))) << "direction " << j << " of " << total << " bits";
    }
  }
}

TEST(Spectral, WaterFillingKeepsTheAverageAndFavoursLargeEigenvalues) {
  Rng rng(11);
  for (unsigned bits : {1u, 2u, 3u, 4u, 6u}) {
    std::vector<double> lambda(64);
    for (double& l : lambda) l = std::exp(4 * rng.normal());  // spread over many octaves
    std::sort(lambda.rbegin(), lambda.rend());
    const std::vector<unsigned> got = spectral::water_fill_bits(lambda, bits * lambda.size());
    EXPECT_EQ(std::accumulate(got.begin(), got.end(), size_t{0}), bits * lambda.size()) << bits;
    for (size_t j = 1; j < got.size(); ++j) EXPECT_LE(got[j], got[j - 1]) << "direction " << j;
    EXPECT_GT(got.front(), bits);  // the largest eigenvalue gets more than the average...
    EXPECT_LT(got.back(), bits);   // ...and the smallest less
    for (unsigned b : got) EXPECT_LE(b, spectral::kMaxDirectionBits);
  }
  // A flat spectrum gets the average everywhere.
  const std::vector<unsigned> flat = spectral::water_fill_bits(std::vector<double>(16, 1.0), 48);
  EXPECT_EQ(flat, std::vector<unsigned>(16, 3));
}

TEST(Spectral, ParticipationRatioCountsTheDirectionsThatCarryTheVariance) {
  std::vector<double> lambda(128, 0.0);
  for (size_t k : {1u, 4u, 9u}) {
    std::fill(lambda.begin(), lambda.end(), 0.0);
    std::fill(lambda.begin(), lambda.begin() + k, 2.5);
    EXPECT_EQ(spectral::participation_signal_count(lambda), k);
  }
  EXPECT_EQ(spectral::participation_signal_count(std::vector<double>(8, 0.0)), 1u);
  EXPECT_EQ(spectral::participation_signal_count(std::vector<double>(8, 1.0)), 8u);
}

constexpr size_t kDim = 128;

// Keys whose variance sits in a few directions: `spikes` coordinates of deviation 12, the rest 1,
// plus a common offset, turned by a random orthogonal matrix (randomized Hadamard), so that no
// key channel is aligned with the signal.
std::vector<float> spiked_keys(size_t n, size_t spikes, uint64_t seed) {
  std::vector<float> x = test::gaussian(n * kDim, seed);
  const Rotation turn(kDim, 77);
  for (size_t t = 0; t < n; ++t) {
    float* row = x.data() + t * kDim;
    for (size_t c = 0; c < spikes; ++c) row[c] = 12 * row[c] + 3;
    turn.forward(row);
  }
  return x;
}

// A layer of one KV head calibrated on 4096 spiked keys, evaluated on others of the same law.
struct Fitted {
  LayerShape shape{1, kDim, 0, 0};
  std::vector<float> calib_values;
  explicit Fitted(const std::string& spec, size_t spikes = 4, size_t dim = kDim) {
    shape.head_dim = dim;
    const size_t n = 4096;
    std::vector<float> keys = dim == kDim ? spiked_keys(n, spikes, 5) : test::gaussian(n * dim, 5);
    calib_values = test::gaussian(n * dim, 6);
    const CalibrationSamples s{keys, calib_values, n, 1, dim, 0};
    shape.calibration = calibrate_on_samples(parse_spec(spec), s);
  }
  LayerCodecs codecs(const std::string& spec) const {
    const Spec p = parse_spec(spec);
    return p.method->make(p.params, shape);
  }
};

// The key codec of the layer's only KV head (its stream state is the head's index alone).
std::unique_ptr<Codec> key_stream(const LayerCodecs& c) { return c.key->with_states(c.key->fit_streams(nullptr, 0, 1), 0); }

TEST(Spectral, TheRotationIsOrthogonalAndPreservesQueryKeyProducts) {
  const Fitted f("spectral");
  const auto codec = key_stream(f.codecs("spectral"));
  const spectral::HeadBasis& b = dynamic_cast<const SpectralKeyCodec&>(*codec).basis();
  for (size_t i = 0; i < kDim; ++i) {
    for (size_t j = 0; j < kDim; ++j) {
      ASSERT_NEAR(test::dot(&b.rotation[i * kDim], &b.rotation[j * kDim], kDim), i == j ? 1.0 : 0.0, 1e-5)
          << "rows " << i << ", " << j;
    }
  }
  const std::vector<float> q = test::gaussian(16 * kDim, 8), k = spiked_keys(16, 4, 9);
  std::vector<float> rq(kDim), rk(kDim);
  for (size_t t = 0; t < 16; ++t) {
    spectral::rotate(b.rotation, &q[t * kDim], rq.data(), kDim);
    spectral::rotate(b.rotation, &k[t * kDim], rk.data(), kDim);
    const double want = test::dot(&q[t * kDim], &k[t * kDim], kDim);
    EXPECT_NEAR(test::dot(rq.data(), rk.data(), kDim), want, 1e-4 * (1 + std::fabs(want))) << t;
  }
}

TEST(Spectral, TheBasisIsTheSpikedDirectionsWithTheirBits) {
  const Fitted f("spectral:bits=3");
  const LayerCalibration& cal = f.shape.calibration->layers[0];
  const auto eigenvalues = cal.table(0, "key.eigenvalues", kDim);
  // Four spikes of variance 144 against 124 of 1: almost all the unit keys' variance is in 4
  // directions, and the participation ratio finds a handful.
  double top = 0, all = 0;
  for (size_t j = 0; j < kDim; ++j) (j < 4 ? top : all) += eigenvalues[j];
  EXPECT_GT(top / (top + all), 0.7);
  const spectral::Allocation a = spectral::allocate(eigenvalues, {3, 0, true});
  EXPECT_GE(a.signal, 3u);
  EXPECT_LE(a.signal, 8u);
  EXPECT_EQ(std::accumulate(a.bits.begin(), a.bits.end(), size_t{0}), 3 * kDim);
  for (size_t j = 0; j < 4; ++j) EXPECT_GE(a.bits[j], 6u) << "spike " << j;
  EXPECT_EQ(cal.table(0, "key.signal.levels", a.signal_levels()).size(), a.signal_levels());
  // alloc=uniform gives every direction the average (the ablation of the water-filling).
  EXPECT_EQ(spectral::allocate(eigenvalues, {3, 0, false}).bits, std::vector<unsigned>(kDim, 3));
  // signal= sets d_s instead.
  const Fitted g("spectral:signal=2");
  EXPECT_EQ(g.shape.calibration->layers[0].table(0, "key.noise.center", kDim - 2).size(), kDim - 2);
}

TEST(Spectral, FusedScoresEqualTheDecodedKeysProducts) {
  const Fitted f("spectral");
  const auto codec = key_stream(f.codecs("spectral"));
  const size_t n = 200, nq = 3;
  const std::vector<float> k = spiked_keys(n, 4, 12), q = test::gaussian(nq * kDim, 13);
  std::vector<uint8_t> codes(codec->code_bytes(n));
  codec->encode(k.data(), n, codes.data());
  std::vector<float> decoded(n * kDim), fused(nq * n);
  codec->decode(codes.data(), n, decoded.data());
  ASSERT_TRUE(codec->fused_score());
  codec->score(q.data(), nq, codes.data(), n, fused.data());
  for (size_t i = 0; i < nq; ++i) {
    for (size_t t = 0; t < n; ++t) {
      const double want = test::dot(&q[i * kDim], &decoded[t * kDim], kDim);
      ASSERT_NEAR(fused[i * n + t], want, 1e-4 * (1 + std::fabs(want))) << "query " << i << " token " << t;
    }
  }
}

TEST(Spectral, OnASpikedSpectrumItBeatsTurboquantMseAtEqualBits) {
  const size_t n = 2000;
  const std::vector<float> k = spiked_keys(n, 4, 21);
  for (unsigned bits : {2u, 3u, 4u}) {
    const std::string spec = "spectral:bits=" + std::to_string(bits);
    const Fitted f(spec);
    const auto codec = key_stream(f.codecs(spec));
    const turboquant::TurboQuantMseCodec turbo(kDim, bits, 1);
    ASSERT_EQ(codec->code_bytes(1), turbo.code_bytes(1));
    const double ours = test::sq_error(k, test::round_trip(*codec, k, n));
    const double theirs = test::sq_error(k, test::round_trip(turbo, k, n));
    EXPECT_LT(ours, 0.6 * theirs) << bits << " bits: spectral " << ours << ", turboquant_mse " << theirs;
  }
}

TEST(Spectral, BytesPerTokenAreTheDocumentedOnes) {
  for (const auto& [bits, dim] : {std::pair{3u, size_t{128}}, std::pair{2u, size_t{64}}, std::pair{5u, size_t{64}}}) {
    const std::string spec = "spectral:bits=" + std::to_string(bits);
    const Fitted f(spec, 4, dim);
    const LayerCodecs c = f.codecs(spec);
    EXPECT_EQ(c.key->code_bytes(1), 4 + bits * dim / 8) << spec << " at head_dim " << dim;
    EXPECT_EQ(c.key->code_bytes(10), 10 * (4 + bits * dim / 8));
    EXPECT_EQ(c.value->code_bytes(1), 4 + 4 * dim / 8);  // turboquant_mse, vbits 4
    const auto codec = key_stream(c);
    const spectral::HeadBasis& b = dynamic_cast<const SpectralKeyCodec&>(*codec).basis();
    EXPECT_EQ(c.key->state_bytes(), 4 * (dim * dim + b.levels.size()) + dim);
    EXPECT_EQ(c.key->stream_state_bytes(), 4u);  // the KV head's index
  }
}

TEST(Spectral, CorruptCodesAreRefused) {
  const Fitted f("spectral");
  const auto codec = key_stream(f.codecs("spectral"));
  const std::vector<float> k = spiked_keys(4, 4, 30);
  std::vector<uint8_t> codes(codec->code_bytes(4));
  codec->encode(k.data(), 4, codes.data());
  EXPECT_NO_THROW(codec->check_codes(codes.data(), 4));
  for (float bad : {-1.0f, NAN, INFINITY}) {
    std::vector<uint8_t> damaged = codes;
    std::memcpy(damaged.data() + 2 * codec->code_bytes(1), &bad, 4);
    const std::string message = test::error_message<Error>([&] { codec->check_codes(damaged.data(), 4); });
    EXPECT_CONTAINS(message, "token 2");
    EXPECT_CONTAINS(message, "expected a finite norm >= 0");
  }
  // A stream state naming another KV head, or of another size.
  const LayerCodecs c = f.codecs("spectral");
  EXPECT_CONTAINS(test::error_message<Error>([&] { c.key->with_states({{1, 0, 0, 0}}, 0); }), "index 1");
  EXPECT_CONTAINS(test::error_message<Error>([&] { c.key->with_states({{}}, 0); }), "0 bytes");
  EXPECT_CONTAINS(test::error_message<Error>([&] { c.key->with_states({{0, 0, 0, 0}}, 1); }), "no basis for KV head 1");
}

TEST(Spectral, MissingOrMismatchedCalibrationIsRefused) {
  const std::string missing = test::error_message<Error>([] { KVCache cache("spectral", LayerShape{1, kDim, 0, 0}); });
  EXPECT_CONTAINS(missing, "needs calibration");
  EXPECT_CONTAINS(missing, "veloxquant calibrate");
  // Fitted for 3 bits, asked for 2.
  const Fitted f("spectral:bits=3");
  EXPECT_CONTAINS(test::error_message<Error>([&] { f.codecs("spectral:bits=2"); }), "spectral:bits=3");
  // Fitted at head_dim 64, asked for 128.
  const Fitted g("spectral", 4, 64);
  LayerShape wide = g.shape;
  wide.head_dim = kDim;
  EXPECT_CONTAINS(test::error_message<Error>([&] { find_method("spectral").make(parse_spec("spectral").params, wide); }),
                  "head_dim");
  test::expect_refused_naming("spectral:signal=129", "signal", f.shape);
}

TEST(Spectral, DamagedTablesAreRefused) {
  const Fitted f("spectral");
  auto damaged = [&](const char* table, size_t index, float value) {
    auto artifact = std::make_shared<CalibrationArtifact>(*f.shape.calibration);
    artifact->layers[0].heads[0][table][index] = value;
    LayerShape s = f.shape;
    s.calibration = artifact;
    return test::error_message<FormatError>([&] { find_method("spectral").make(parse_spec("spectral").params, s); });
  };
  EXPECT_CONTAINS(damaged("key.rotation", 5, 0.5f), "not orthonormal");
  EXPECT_CONTAINS(damaged("key.eigenvalues", 10, 1e3f), "expected >= 0 and descending");
  EXPECT_CONTAINS(damaged("key.noise.scale", 3, 0.0f), "expected > 0");
  EXPECT_CONTAINS(damaged("key.signal.levels", 1, -1e3f), "not ascending");
  auto artifact = std::make_shared<CalibrationArtifact>(*f.shape.calibration);
  artifact->layers[0].heads[0]["key.noise.levels"].pop_back();
  LayerShape s = f.shape;
  s.calibration = artifact;
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { find_method("spectral").make(parse_spec("spectral").params, s); }),
                  "key.noise.levels");
}

}  // namespace
}  // namespace veloxquant
