// What KVCache does for codecs fitted per stream (Codec::fits_streams: svdq, palu) and for
// saliency codecs (Codec::wants_attention: zipcache), checked with two small codecs that record
// what the cache hands them, so that the cache's side is tested apart from any real method.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codecs/fp16/fp16_codec.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr size_t kBlock = 4;

// Stores x minus a per-stream mean, fitted to the prompt: the state is the mean (dim f32).
class MeanCentredCodec final : public Codec {
 public:
  explicit MeanCentredCodec(size_t dim, std::vector<float> mean = {})
      : dim_(dim), mean_(std::move(mean)), fp16_(dim) {}
  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return kBlock; }
  size_t code_bytes(size_t n) const override { return fp16_.code_bytes(n); }
  size_t state_bytes() const override { return 0; }
  bool fits_streams() const override { return mean_.empty(); }
  size_t stream_state_bytes() const override { return dim_ * sizeof(float); }
  std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n, size_t heads) const override {
    ++fits;
    fitted_tokens = n;
    std::vector<std::vector<uint8_t>> states(heads, std::vector<uint8_t>(dim_ * sizeof(float)));
    for (size_t h = 0; h < heads; ++h) {
      std::vector<float> mean(dim_, 0.0f);
      for (size_t t = 0; t < n; ++t)
        for (size_t c = 0; c < dim_; ++c) mean[c] += x[(t * heads + h) * dim_ + c] / static_cast<float>(n);
      std::memcpy(states[h].data(), mean.data(), states[h].size());
    }
    return states;
  }
  std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states, size_t head) const override {
    if (states[head].size() != dim_ * sizeof(float)) {
      throw Error("mean state of " + std::to_string(states[head].size()) + " bytes; expected " +
                  std::to_string(dim_ * sizeof(float)));
    }
    std::vector<float> mean(dim_);
    std::memcpy(mean.data(), states[head].data(), states[head].size());
    return std::make_unique<MeanCentredCodec>(dim_, std::move(mean));
  }
  void encode(const float* x, size_t n, uint8_t* codes) const override {
    if (mean_.empty()) throw Error("the prototype encoded");
    std::vector<float> centred(x, x + n * dim_);
    for (size_t i = 0; i < centred.size(); ++i) centred[i] -= mean_[i % dim_];
    fp16_.encode(centred.data(), n, codes);
  }
  void decode(const uint8_t* codes, size_t n, float* x) const override {
    fp16_.decode(codes, n, x);
    for (size_t i = 0; i < n * dim_; ++i) x[i] += mean_[i % dim_];
  }
  const std::vector<float>& mean() const { return mean_; }

  static inline int fits = 0;
  static inline size_t fitted_tokens = 0;

 private:
  size_t dim_;
  std::vector<float> mean_;
  Fp16Codec fp16_;
};

// fp16 storage that records the attention each encode_salient() call was given.
class AttentionRecorder final : public Codec {
 public:
  explicit AttentionRecorder(size_t dim) : fp16_(dim) {}
  size_t dim() const override { return fp16_.dim(); }
  size_t block_tokens() const override { return kBlock; }
  size_t code_bytes(size_t n) const override { return fp16_.code_bytes(n); }
  size_t state_bytes() const override { return 0; }
  bool wants_attention() const override { return true; }
  void encode(const float* x, size_t n, uint8_t* codes) const override { encode_salient(x, n, nullptr, codes); }
  void encode_salient(const float* x, size_t n, const float* attention, uint8_t* codes) const override {
    calls.push_back(attention ? std::vector<float>(attention, attention + n) : std::vector<float>{});
    fp16_.encode(x, n, codes);
  }
  void decode(const uint8_t* codes, size_t n, float* x) const override { fp16_.decode(codes, n, x); }

  static inline std::vector<std::vector<float>> calls;  // keys' calls, then values', per block run

 private:
  Fp16Codec fp16_;
};

MethodInfo test_method(const std::string& name, bool fitted) {
  MethodInfo m;
  m.name = name;
  m.family = "test";
  m.paper = "test";
  m.summary = "test";
  m.make = [fitted](const Params&, const LayerShape& s) {
    LayerCodecs c;
    if (fitted) {
      c.key = std::make_unique<MeanCentredCodec>(s.head_dim);
      c.value = std::make_unique<Fp16Codec>(s.head_dim);
    } else {
      c.key = std::make_unique<AttentionRecorder>(s.head_dim);
      c.value = std::make_unique<Fp16Codec>(s.head_dim);
    }
    c.residual = 2;
    return c;
  };
  return m;
}

const MethodInfo& fitted_method() {
  static const MethodInfo m = test_method("mean_centred", true);
  return m;
}
const MethodInfo& salient_method() {
  static const MethodInfo m = test_method("attention_recorder", false);
  return m;
}
Spec spec_of(const MethodInfo& m) {
  Spec s;
  s.method = &m;
  return s;
}

void append(KVCache& cache, const std::vector<float>& k, const std::vector<float>& v, size_t from, size_t n) {
  const size_t h = cache.kv_heads(), d = cache.head_dim();
  cache.append(TensorView::f32(k.data() + from * h * d, {n, h, d}), TensorView::f32(v.data() + from * h * d, {n, h, d}));
}

TEST(FittedStreams, FittedOnceToThePromptOfEveryHead) {
  const size_t h = 2, d = 8, prompt = 11;
  std::vector<float> k = test::gaussian(20 * h * d, 1), v = test::gaussian(20 * h * d, 2);
  for (size_t i = 0; i < k.size(); ++i) k[i] += static_cast<float>(i % (h * d));  // per-head offsets
  MeanCentredCodec::fits = 0;
  KVCache cache(spec_of(fitted_method()), LayerShape{h, d, 0, 0});
  append(cache, k, v, 0, 1);  // one token: nothing to encode, nothing fitted
  cache.finish_step();
  EXPECT_EQ(MeanCentredCodec::fits, 0);
  append(cache, k, v, 1, prompt - 1);
  EXPECT_EQ(MeanCentredCodec::fits, 1);
  EXPECT_EQ(MeanCentredCodec::fitted_tokens, prompt);
  for (size_t t = prompt; t < 20; ++t) append(cache, k, v, t, 1);
  EXPECT_EQ(MeanCentredCodec::fits, 1);  // once per layer
  for (size_t head = 0; head < h; ++head) {
    const CacheStream& s = cache.key_streams()[head];
    ASSERT_EQ(s.state.size(), d * sizeof(float));
    std::vector<float> mean(d);
    std::memcpy(mean.data(), s.state.data(), s.state.size());
    for (size_t c = 0; c < d; ++c) {
      double want = 0;
      for (size_t t = 0; t < prompt; ++t) want += k[(t * h + head) * d + c];
      EXPECT_NEAR(mean[c], want / prompt, 1e-2) << "head " << head << " channel " << c;
    }
    EXPECT_TRUE(cache.value_streams()[head].state.empty());  // the value codec is not fitted
  }
  // bytes() counts the states; decode goes through each head's fitted codec.
  size_t expect = 0;
  for (const CacheStream& s : cache.key_streams()) expect += s.state.size() + s.codes.size() + s.tail.size();
  EXPECT_EQ(cache.key_bytes(), expect);
  const std::vector<float> keys = cache.decode_keys();
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_NEAR(keys[i], k[i], 0.02f * (1 + std::fabs(k[i]))) << i;
}

TEST(FittedStreams, RestoreRebuildsTheFittedCodecsAndRefusesBadStates) {
  const size_t h = 2, d = 8, n = 15;
  const std::vector<float> k = test::gaussian(n * h * d, 3), v = test::gaussian(n * h * d, 4);
  KVCache cache(spec_of(fitted_method()), LayerShape{h, d, 0, 0});
  append(cache, k, v, 0, n);
  KVCache copy(spec_of(fitted_method()), LayerShape{h, d, 0, 0});
  copy.restore(cache.key_streams(), cache.value_streams());
  EXPECT_EQ(copy.decode_keys(), cache.decode_keys());
  EXPECT_EQ(copy.key_bytes(), cache.key_bytes());

  std::vector<CacheStream> keys = cache.key_streams();
  keys[1].state.pop_back();
  EXPECT_CONTAINS(test::error_message<Error>([&] { copy.restore(keys, cache.value_streams()); }),
                  "the key streams: mean state of 31 bytes; expected 32");
  keys = cache.key_streams();
  for (CacheStream& s : keys) s.state.clear();
  EXPECT_CONTAINS(test::error_message<Error>([&] { copy.restore(keys, cache.value_streams()); }),
                  "has 12 encoded tokens but no fitted state");
  std::vector<CacheStream> values = cache.value_streams();
  values[0].state = {1, 2, 3};
  EXPECT_CONTAINS(test::error_message<Error>([&] { copy.restore(cache.key_streams(), values); }),
                  "the value streams hold 3 bytes of fitted state; expected none");
  EXPECT_EQ(copy.decode_keys(), cache.decode_keys());  // unchanged by the refusals
}

// Token t's normalized attention: the mean, over the query rows that saw it, of its probability.
std::vector<double> normalized_attention(const std::vector<float>& q, size_t nq, size_t qh,
                                         const std::vector<float>& k, size_t tokens, size_t d) {
  std::vector<double> sum(tokens, 0.0), rows(tokens, 0.0);
  for (size_t i = 0; i < nq; ++i)
    for (size_t r = 0; r < qh; ++r) {
      const size_t visible = tokens - nq + i + 1;
      std::vector<double> s(visible);
      double mx = -1e300, z = 0;
      for (size_t t = 0; t < visible; ++t) {
        double dot = 0;
        for (size_t c = 0; c < d; ++c) dot += static_cast<double>(q[(i * qh + r) * d + c]) * k[t * d + c];
        mx = std::max(mx, s[t] = dot / std::sqrt(static_cast<double>(d)));
      }
      for (double& x : s) z += (x = std::exp(x - mx));
      for (size_t t = 0; t < visible; ++t) {
        sum[t] += s[t] / z;
        rows[t] += 1;
      }
    }
  for (size_t t = 0; t < tokens; ++t) sum[t] /= rows[t];
  return sum;
}

TEST(SaliencyCodecs, EncodedAtTheEndOfTheStepWithTheNormalizedAttention) {
  const size_t d = 16, qh = 2, n = 10;  // one KV head, two query heads
  std::vector<float> k = test::gaussian(n * d, 5), v = test::gaussian(n * d, 6), q = test::gaussian(n * qh * d, 7);
  for (size_t c = 0; c < d; ++c) k[3 * d + c] *= 4;  // token 3 draws attention
  AttentionRecorder::calls.clear();
  KVCache cache(spec_of(salient_method()), LayerShape{1, d, 0, 0});
  append(cache, k, v, 0, n);
  EXPECT_TRUE(AttentionRecorder::calls.empty());  // held for the step's attention
  EXPECT_EQ(cache.key_streams()[0].encoded, 0u);
  std::vector<float> out(n * qh * d);
  cache.attend_observed(TensorView::f32(q.data(), {n, qh, d}), out.data());
  cache.finish_step();
  // 10 tokens, a residual window of 2: two blocks of 4 encoded in one call.
  ASSERT_EQ(AttentionRecorder::calls.size(), 1u);
  ASSERT_EQ(cache.key_streams()[0].encoded, 8u);
  const std::vector<double> want = normalized_attention(q, n, qh, k, n, d);
  const std::vector<float>& got = AttentionRecorder::calls[0];
  ASSERT_EQ(got.size(), 8u);
  for (size_t t = 0; t < 8; ++t) EXPECT_NEAR(got[t], want[t], 1e-4 * (1 + want[t])) << "token " << t;
  EXPECT_GT(got[3], 2 * got[2]);
  EXPECT_EQ(cache.key_bytes(), 10 * d * 2);  // fp16 codes and tail alike
}

TEST(SaliencyCodecs, HeldBlocksAreEncodedByTheNextAppendAndWithoutAttentionGetNone) {
  const size_t d = 8, n = 7;
  const std::vector<float> k = test::gaussian(8 * d, 8), v = test::gaussian(8 * d, 9);
  AttentionRecorder::calls.clear();
  KVCache cache(spec_of(salient_method()), LayerShape{1, d, 0, 0});
  append(cache, k, v, 0, n);  // never attended
  append(cache, k, v, n, 1);  // encodes the block held from the first append
  ASSERT_EQ(AttentionRecorder::calls.size(), 1u);
  EXPECT_TRUE(AttentionRecorder::calls[0].empty());  // nullptr: the codec's own proxy
  EXPECT_EQ(cache.key_streams()[0].encoded, 4u);
  EXPECT_EQ(cache.key_streams()[0].tail_tokens, 4u);
}

TEST(SaliencyCodecs, CannotBeCombinedWithEviction) {
  Spec s = parse_spec("snapkv+fp16");
  s.method = &salient_method();
  EXPECT_CONTAINS(test::error_message<SpecError>([&] { KVCache(s, LayerShape{1, 8, 0, 0}); }),
                  "combining the two is not supported");
}

}  // namespace
}  // namespace veloxquant
