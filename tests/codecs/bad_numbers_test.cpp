// Every codec's behaviour on the edge cases of its contract (docs/reliability.md): inputs are
// finite with |x| <= 65504 (KVCache::append refuses anything else, tests/cache/bad_numbers_test.cpp);
// within that, all-zero vectors decode to exact zeros, and vectors at the fp16 limit, mixed with
// tiny or zero elements, decode to finite numbers, and so do their scores and value sums.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "eval/synthetic_kv.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

constexpr float kFp16Max = 65504.0f;

// (method name, head_dim, keys or values)
class CodecBadNumbers : public ::testing::TestWithParam<std::tuple<std::string, size_t, bool>> {
 protected:
  void SetUp() override {
    const auto& [name, dim, keys] = GetParam();
    const MethodInfo& m = find_method(name);
    const Spec spec = parse_spec(name);
    codecs = m.make(spec.params, with_synthetic_calibration(spec, LayerShape{1, dim, 0, 7}));
    codec = keys ? codecs.key.get() : codecs.value.get();
    n = 2 * codec->block_tokens();
  }
  size_t dim() const { return codec->dim(); }

  // Encodes and decodes x ([n, dim]); also scores and accumulates on the codes.
  struct RoundTrip {
    std::vector<float> decoded, scores, sums;
  };
  // A codec fitted per stream is fitted to x itself, as a cache fits it to its prompt.
  RoundTrip round_trip(const std::vector<float>& x) const {
    const std::shared_ptr<const Codec> c = codec_for_stream(*codec, x.data(), n);
    std::vector<uint8_t> codes(c->code_bytes(n));
    c->encode(x.data(), n, codes.data());
    RoundTrip r{std::vector<float>(n * dim()), std::vector<float>(n), std::vector<float>(dim(), 0.0f)};
    c->decode(codes.data(), n, r.decoded.data());
    const std::vector<float> q(dim(), 1.0f), w(n, 1.0f / static_cast<float>(n));
    c->score(q.data(), 1, codes.data(), n, r.scores.data());
    c->accumulate(w.data(), 1, codes.data(), n, r.sums.data());
    return r;
  }
  static void expect_finite(const RoundTrip& r) {
    for (const auto* v : {&r.decoded, &r.scores, &r.sums}) {
      for (float x : *v) ASSERT_TRUE(std::isfinite(x)) << x;
    }
  }

  LayerCodecs codecs;
  const Codec* codec = nullptr;
  size_t n = 0;
};

TEST_P(CodecBadNumbers, ZeroVectorsDecodeToZero) {
  // Negative zeros too: KIVI then stores a step of -0, which its corrupt-code check must accept
  // (a finding of fuzz/codec_fuzzer.cpp, fuzz/corpus/codec/regress-kivi-negative-zero-step).
  for (int pattern = 0; pattern < 3; ++pattern) {  // +0, -0, then both alternating
    std::vector<float> zeros(n * dim());
    for (size_t i = 0; i < zeros.size(); ++i) zeros[i] = pattern == 1 || (pattern == 2 && i % 2) ? -0.0f : 0.0f;
    const RoundTrip r = round_trip(zeros);
    for (const auto* v : {&r.decoded, &r.scores, &r.sums}) {
      for (float x : *v) ASSERT_EQ(x, 0.0f);
    }
  }
}

TEST_P(CodecBadNumbers, Fp16LimitDecodesFinite) {
  std::vector<float> x(n * dim());
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 3 == 0 ? kFp16Max : -kFp16Max;
  expect_finite(round_trip(x));
}

TEST_P(CodecBadNumbers, ExtremeMagnitudesSideBySideDecodeFinite) {
  // One channel at the limit among tiny ones, zeros and fp16 subnormals in the same vector.
  std::vector<float> x(n * dim());
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % dim();
    x[i] = c == 0 ? kFp16Max : c % 3 == 0 ? 0.0f : c % 3 == 1 ? 1e-30f : -6e-8f;
  }
  expect_finite(round_trip(x));
}

INSTANTIATE_TEST_SUITE_P(
    EveryMethod, CodecBadNumbers,
    ::testing::Combine(::testing::ValuesIn([] {
                         std::vector<std::string> names;
                         for (const auto& m : registered_methods()) names.push_back(m.name);
                         return names;
                       }()),
                       ::testing::Values(size_t{8}, size_t{80}, size_t{128}), ::testing::Bool()),
    [](const auto& test_param) {
      const auto& p = test_param.param;
      return std::get<0>(p) + "_d" + std::to_string(std::get<1>(p)) + (std::get<2>(p) ? "_keys" : "_values");
    });

}  // namespace
}  // namespace veloxquant
