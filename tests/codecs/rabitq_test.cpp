// RaBitQ keys: the paper's properties (an unbiased inner-product estimator within its error
// bound), the IVF's effect, the record layout and the refusal of corrupt codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "codec_test_helpers.h"
#include "codecs/rabitq/rabitq_key_codec.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

using rabitq::RabitqKeyCodec;

double norm(const float* a, size_t d) { return std::sqrt(test::dot(a, a, d)); }

std::vector<float> scores_of(const Codec& codec, const std::vector<float>& q, size_t nq,
                             const std::vector<float>& k, size_t n) {
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(k.data(), n, codes.data());
  std::vector<float> s(nq * n);
  codec.score(q.data(), nq, codes.data(), n, s.data());
  return s;
}

TEST(Rabitq, RecordsHoldAScaleTheSignBitsAndTheCluster) {
  const RabitqKeyCodec codec(128, 16, 1, 2);
  EXPECT_EQ(codec.code_bytes(10), 10u * (4 + 16 + 1));
  EXPECT_EQ(codec.stream_state_bytes(), 16u * 128 * 2);
  const std::vector<float> k = test::gaussian(128, 3);
  EXPECT_THROW(test::round_trip(codec, k, 1), Error);  // the prototype has no centroids
}

// E[<o_bar, q> / <o_bar, o>] = <o, q> over the random rotation (RaBitQ, Theorem 3.2): the mean
// of the estimate over independent rotations converges to the true product.
TEST(Rabitq, TheInnerProductEstimateIsUnbiasedOverRotations) {
  const size_t d = 64, seeds = 2000;
  const std::vector<float> k = test::gaussian(d, 10), q = test::gaussian(d, 11);
  const std::vector<float> fit(d, 0.0f);  // one centroid at the origin: the residual is k itself
  const double truth = test::dot(q.data(), k.data(), d);
  double sum = 0, sum2 = 0;
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    const auto codec = codec_for_stream(RabitqKeyCodec(d, 1, seed, 0), fit.data(), 1);
    const double est = scores_of(*codec, q, 1, k, 1)[0];
    sum += est, sum2 += est * est;
  }
  const double mean = sum / seeds, sd = std::sqrt(sum2 / seeds - mean * mean);
  EXPECT_GT(sd, 0.05 * std::fabs(truth));  // a 1-bit estimate does vary with the rotation
  EXPECT_LT(std::fabs(mean - truth), 4 * sd / std::sqrt(static_cast<double>(seeds)))
      << "mean " << mean << " truth " << truth << " sd " << sd;
}

// |<o_bar, q>/<o_bar, o> - <o, q>| <= sqrt((1 - <o_bar, o>^2) / <o_bar, o>^2) eps0 / sqrt(D - 1)
// for unit o and q (RaBitQ, Theorem 3.2). The error is <o_bar, e> sqrt(1 - <o, q>^2) / <o_bar, o>
// for a unit e orthogonal to o, and <o_bar, e> is a coordinate of a random point on a sphere of
// radius sqrt(1 - <o_bar, o>^2) in D - 1 dimensions, close to normal: the bound fails with
// probability at most P(|N(0, 1)| > eps0), 5.7 % at the paper's eps0 = 1.9 and 0.27 % at 3.
TEST(Rabitq, EstimatesStayWithinThePapersErrorBound) {
  const size_t d = 128, n = 1000, nq = 20;
  const std::vector<float> keys = test::gaussian(n * d, 20), queries = test::gaussian(nq * d, 21);
  const auto codec = codec_for_stream(RabitqKeyCodec(d, 1, 5, 6), keys.data(), n);
  const auto& rq = static_cast<const RabitqKeyCodec&>(*codec);
  const std::vector<float>& c = rq.centroids();
  const std::vector<float> scores = scores_of(*codec, queries, nq, keys, n);
  const std::vector<float> decoded = test::round_trip(*codec, keys, n);
  // errors in units of the bound at eps0 = 1
  std::vector<double> errors;
  for (size_t t = 0; t < n; ++t) {
    std::vector<float> r(d), r_bar(d);
    for (size_t i = 0; i < d; ++i) r[i] = keys[t * d + i] - c[i], r_bar[i] = decoded[t * d + i] - c[i];
    const double r_norm = norm(r.data(), d), s = norm(r_bar.data(), d);  // decoded - c = s o_bar
    const double ip = r_norm / s;                                          // <o_bar, o>
    EXPECT_GT(ip, 0.7);  // about sqrt(2 / pi) = 0.80 in high dimension
    const double unit_bound = std::sqrt((1 - ip * ip) / (ip * ip)) / std::sqrt(d - 1.0);
    for (size_t i = 0; i < nq; ++i) {
      const float* q = queries.data() + i * d;
      const double qn = norm(q, d);
      const double truth = (test::dot(q, keys.data() + t * d, d) - test::dot(q, c.data(), d)) / (qn * r_norm);
      const double est = (scores[i * n + t] - test::dot(q, c.data(), d)) / (qn * r_norm);
      errors.push_back(std::fabs(est - truth) / unit_bound);
    }
  }
  for (const auto& [eps0_value, tail] : {std::pair{1.9, 0.0574}, std::pair{3.0, 0.0027}}) {
    const double eps0 = eps0_value;  // a plain local: C++20 lambdas may not capture a binding
    const double failures = static_cast<double>(std::count_if(errors.begin(), errors.end(),
                                                              [&](double e) { return e > eps0; }));
    const double rate = failures / static_cast<double>(errors.size());
    const double se = std::sqrt(tail * (1 - tail) / static_cast<double>(errors.size()));
    EXPECT_LE(rate, tail + 3 * se) << "eps0 " << eps0;
  }
}

TEST(Rabitq, FusedScoresEqualTheDecodedKeysProducts) {
  const size_t d = 80, n = 300, nq = 3;  // not a power of two: a dense random rotation
  const std::vector<float> keys = test::gaussian(n * d, 30), queries = test::gaussian(nq * d, 31);
  const auto codec = codec_for_stream(RabitqKeyCodec(d, 8, 7, 8), keys.data(), n);
  const std::vector<float> fused = scores_of(*codec, queries, nq, keys, n);
  const std::vector<float> decoded = test::round_trip(*codec, keys, n);
  for (size_t i = 0; i < nq; ++i)
    for (size_t t = 0; t < n; ++t)
      EXPECT_NEAR(fused[i * n + t], test::dot(queries.data() + i * d, decoded.data() + t * d, d), 2e-3)
          << "query " << i << " token " << t;
}

// In the rotated basis a key decodes to P c_j + s x: the rotation of what decode() gives, at a
// power-of-two head_dim (Hadamard) and at 80 (dense).
TEST(Rabitq, DecodingInTheRotatedBasisIsTheRotatedDecode) {
  for (const size_t d : {size_t{128}, size_t{80}}) {
    const size_t n = 64;
    const std::vector<float> keys = test::gaussian(n * d, 40 + d);
    const auto codec = codec_for_stream(RabitqKeyCodec(d, 4, 7, 8), keys.data(), n);
    ASSERT_TRUE(codec->decodes_in_basis());
    std::vector<uint8_t> codes(codec->code_bytes(n));
    codec->encode(keys.data(), n, codes.data());
    std::vector<float> decoded(n * d), in_basis(n * d);
    codec->decode(codes.data(), n, decoded.data());
    codec->to_basis(decoded.data(), n);
    codec->decode_in_basis(codes.data(), n, in_basis.data());
    EXPECT_LT(test::relative_l2(in_basis, decoded), 1e-5) << "head_dim " << d;
    codec->from_basis(in_basis.data(), n);  // and back
    codec->decode(codes.data(), n, decoded.data());
    EXPECT_LT(test::relative_l2(in_basis, decoded), 1e-5) << "head_dim " << d;
  }
}

// Keys drawn around a few distant centres: an IVF with a centroid per centre leaves residuals,
// and errors, a fraction of what a single centroid leaves.
TEST(Rabitq, MoreClustersShrinkTheErrorOnClusteredKeys) {
  const size_t d = 64, n = 800, centres = 8;
  const std::vector<float> centre = test::gaussian(centres * d, 40, 4.0), noise = test::gaussian(n * d, 41);
  std::vector<float> keys(n * d);
  for (size_t t = 0; t < n; ++t)
    for (size_t c = 0; c < d; ++c) keys[t * d + c] = centre[(t % centres) * d + c] + noise[t * d + c];
  const auto error = [&](size_t nlist) {
    return test::sq_error(keys, test::round_trip(*codec_for_stream(RabitqKeyCodec(d, nlist, 1, 2), keys.data(), n), keys, n));
  };
  EXPECT_LT(error(8), 0.2 * error(1));
}

// Keys drawn around `centres` distant centres, [n, heads, d]: token t of every head around centre
// t % centres (token 0 too).
std::vector<float> clustered_keys(size_t n, size_t heads, size_t d, size_t centres, uint64_t seed) {
  const std::vector<float> centre = test::gaussian(centres * d, seed, 4.0),
                           noise = test::gaussian(n * heads * d, seed + 1);
  std::vector<float> keys(n * heads * d);
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = centre[(i / (heads * d) % centres) * d + i % d] + noise[i];
  return keys;
}

// nprobe: each query reads token 0 and the tokens of the nprobe lists whose centroids have the
// largest products with it, and their scores are the ones every list gives; the rest score
// kExcluded. One query on one list reads the gathered records; five on two read most of the
// stream, scored whole and masked.
TEST(Rabitq, NprobeReadsTheListsOfTheLargestCentroidProducts) {
  const size_t d = 64, n = 400, nlist = 8;
  const std::vector<float> keys = clustered_keys(n, 1, d, nlist, 60), queries = test::gaussian(5 * d, 62);
  const auto all = codec_for_stream(RabitqKeyCodec(d, nlist, 1, 2), keys.data(), n);
  ASSERT_FALSE(all->selects_tokens());
  std::vector<uint8_t> codes(all->code_bytes(n));
  all->encode(keys.data(), n, codes.data());
  const size_t stride = all->code_bytes(1);
  for (const auto& [nq, nprobe] : {std::pair<size_t, size_t>{1, 1}, {5, 2}}) {
    const auto probing = codec_for_stream(RabitqKeyCodec(d, nlist, 1, 2, nprobe), keys.data(), n);
    ASSERT_TRUE(probing->selects_tokens());
    std::vector<float> every(nq * n), probed(nq * n);
    all->score(queries.data(), nq, codes.data(), n, every.data());
    probing->score(queries.data(), nq, codes.data(), n, probed.data());
    std::vector<uint8_t> keep(nq * n);
    probing->select(queries.data(), nq, codes.data(), n, keep.data());
    const std::vector<float>& centroids = dynamic_cast<const RabitqKeyCodec&>(*probing).centroids();
    for (size_t i = 0; i < nq; ++i) {
      std::vector<std::pair<double, size_t>> by_product;
      for (size_t j = 0; j < nlist; ++j)
        by_product.emplace_back(-test::dot(queries.data() + i * d, centroids.data() + j * d, d), j);
      std::sort(by_product.begin(), by_product.end());
      size_t read = 0;
      for (size_t t = 0; t < n; ++t) {
        const size_t list = codes[t * stride + stride - 1];
        bool want = t == 0;
        for (size_t j = 0; j < nprobe; ++j) want = want || list == by_product[j].second;
        ASSERT_EQ(keep[i * n + t], want) << "nprobe " << nprobe << " query " << i << " token " << t;
        if (want)
          EXPECT_EQ(probed[i * n + t], every[i * n + t])
              << "nprobe " << nprobe << " query " << i << " token " << t;
        else
          EXPECT_EQ(probed[i * n + t], kExcluded) << "nprobe " << nprobe << " query " << i << " token " << t;
        read += want;
      }
      EXPECT_LT(read, n * nprobe / 6) << "nprobe " << nprobe << " query " << i;  // of 8 lists, and token 0
    }
  }
}

// The cache gives the tokens a query does not read weight 0 on every attention path, so the fused
// (decoding), decoded (prefill) and reference paths agree; nprobe = nlist is every list.
TEST(Rabitq, NprobeAttentionAgreesOnEveryPath) {
  const size_t d = 64, heads = 2, q_heads = 4, n = 500, nq = 3;
  const std::vector<float> keys = clustered_keys(n, heads, d, 8, 70),
                           values = test::gaussian(n * heads * d, 72);
  const std::vector<float> queries = test::gaussian(nq * q_heads * d, 73, 2.0);
  const auto attend = [&](const std::string& spec, AttendPath path) {
    KVCache cache(spec, LayerShape{heads, d, 0, 5});
    cache.append(TensorView::f32(keys.data(), {n, heads, d}), TensorView::f32(values.data(), {n, heads, d}));
    std::vector<float> out(nq * q_heads * d);
    cache.attend(TensorView::f32(queries.data(), {nq, q_heads, d}), out.data(), path);
    return out;
  };
  const std::vector<float> reference = attend("rabitq:nlist=8,nprobe=2", AttendPath::Reference);
  EXPECT_LT(test::relative_l2(attend("rabitq:nlist=8,nprobe=2", AttendPath::Fused), reference), 1e-5);
  EXPECT_LT(test::relative_l2(attend("rabitq:nlist=8,nprobe=2", AttendPath::Decoded), reference), 1e-5);
  const std::vector<float> every = attend("rabitq:nlist=8", AttendPath::Fused);
  EXPECT_GT(test::relative_l2(reference, every), 1e-2);  // the lists left out did carry weight
  EXPECT_EQ(attend("rabitq:nlist=8,nprobe=8", AttendPath::Fused), every);
}

TEST(Rabitq, CorruptClustersAndScalesAreRefused) {
  const size_t d = 32, n = 4;
  const std::vector<float> keys = test::gaussian(n * d, 50);
  const auto codec = codec_for_stream(RabitqKeyCodec(d, 4, 1, 2), keys.data(), n);
  std::vector<uint8_t> codes(codec->code_bytes(n));
  codec->encode(keys.data(), n, codes.data());
  EXPECT_NO_THROW(codec->check_codes(codes.data(), n));
  const size_t stride = codec->code_bytes(1);
  std::vector<uint8_t> bad = codes;
  bad[2 * stride + stride - 1] = 4;
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec->check_codes(bad.data(), n); }),
                  "token 2 names cluster 4");
  bad = codes;
  const float negative = -1.0f;
  std::memcpy(bad.data() + stride, &negative, 4);
  EXPECT_CONTAINS(test::error_message<Error>([&] { codec->check_codes(bad.data(), n); }), "token 1 stores scale -1");
}

TEST(Rabitq, DamagedCentroidStatesAreRefused) {
  const RabitqKeyCodec proto(16, 2, 1, 2);
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)proto.with_states({std::vector<uint8_t>(10)}, 0); }),
                  "take 10 bytes; expected 64");
  std::vector<uint8_t> state(64, 0);
  state[6] = 0x00, state[7] = 0x7c;  // +inf
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)proto.with_states({state}, 0); }), "finite");
  EXPECT_THROW(codec_for_stream(proto, nullptr, 0), ShapeError);
}

TEST(Rabitq, SpecParametersAreChecked) {
  test::expect_refused_naming("rabitq:nlist=0", "nlist");
  test::expect_refused_naming("rabitq:nlist=257", "nlist");
  test::expect_refused_naming("rabitq:vbits=9", "vbits");
  test::expect_refused_naming("rabitq:nlist=16,nprobe=17", "nprobe=17 lists with nlist=16");
  test::expect_refused_naming("rabitq:nprobe=257", "nprobe");
  test::expect_refused_naming("rabitq", "head_dim", LayerShape{1, 1, 0, 0});
}

}  // namespace
}  // namespace veloxquant
