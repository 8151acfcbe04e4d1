// Sessions on stories260K: greedy decoding reproduces the model's documented continuation,
// batched prefill and token-by-token decode agree, every registered cache method runs inside the
// model, and misuse (bad token ids, a full context) is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "calibrated_specs.h"
#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/method.h"
#include "veloxquant/model.h"

namespace veloxquant {
namespace {

const Model& stories() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

int32_t argmax(const std::vector<float>& x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

std::string greedy(const std::string& prompt, size_t n, const std::string& kv = "fp16") {
  Session s(stories(), SessionOptions{kv, 0});
  const Tokenizer& tok = stories().tokenizer();
  std::vector<float> logits = s.eval(tok.encode(prompt, true));
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = argmax(logits);
    out.push_back(t);
    logits = s.eval(std::span(&t, 1));
  }
  return tok.decode(out, /*strip_leading_space=*/false);
}

TEST(Session, GreedyDecodingReproducesTheDocumentedContinuation) {
  const std::string text = greedy("Once upon a time", 40);
  ASSERT_GE(text.size(), 60u);
  EXPECT_EQ(text, std::string(test::kStoriesDocumentedSample).substr(0, text.size()));
}

TEST(Session, PrefillAndTokenByTokenDecodeAgree) {
  const std::vector<int32_t> tokens = stories().tokenizer().encode(
      "Tom had a red kite. He ran to the hill with his dog and the wind took the kite up high.", true);
  Session batch(stories()), step(stories());
  const std::vector<float> all = batch.eval(tokens, Logits::All);
  const size_t vocab = stories().config().vocab;
  double max_err = 0, max_abs = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> one = step.eval(std::span(&tokens[i], 1));
    for (size_t j = 0; j < vocab; ++j) {
      max_err = std::max(max_err, static_cast<double>(std::abs(one[j] - all[i * vocab + j])));
      max_abs = std::max(max_abs, static_cast<double>(std::abs(all[i * vocab + j])));
    }
  }
  // The two orders of summation (matrix-matrix vs matrix-vector products) differ in the last
  // float bits; where such a difference crosses an fp16 rounding boundary of a cached key or
  // value it grows to one fp16 ulp (2^-11 relative), which bounds what is left downstream.
  EXPECT_LT(max_err, 1e-3 * max_abs) << "max |decode - prefill| " << max_err;
  EXPECT_EQ(batch.position(), tokens.size());
}

TEST(Session, Fp16CacheBytesAreExact) {
  Session s(stories());
  s.eval(std::vector<int32_t>(100, 5), Logits::None);
  const ModelConfig& c = stories().config();
  const size_t expected = 2 * 2 * 100 * c.layers * c.kv_heads * c.head_dim;  // K and V, 2 bytes
  EXPECT_EQ(s.kv_fp16_bytes(), expected);
  EXPECT_EQ(s.kv_bytes(), expected);
}

// Every registered method, with nothing held back in fp16 where the method allows it, so the
// codes themselves are attended (a wrapper's window is its inner quantizer's).
TEST(Session, EveryMethodRunsInsideTheModel) {
  for (const MethodInfo& m : registered_methods()) {
    const MethodInfo& stores = m.wrapper() ? find_method(m.default_inner) : m;
    std::string spec = stores.name;
    for (const ParamDef& p : stores.params)
      if (p.name == "residual") spec += ":residual=0";
    if (m.wrapper()) spec = m.name + "+" + spec;
    SCOPED_TRACE(spec);
    Session s(stories(), SessionOptions{test::runnable_spec(stories(), spec), 0});
    const std::vector<int32_t> prompt = stories().tokenizer().encode(
        "Once upon a time, there was a little girl named Lily. She loved to play outside.", true);
    std::vector<float> logits = s.eval(prompt);
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
      const int32_t t = argmax(logits);
      logits = s.eval(std::span(&t, 1));
    }
    EXPECT_GT(s.kv_bytes(), 0u);
    // vecinfer's and comm_vq's calibrated codebooks (256 centroids per sub-space or codebook: 4
    // and 16 KiB per KV head at head_dim 8) outweigh this short session's fp16 cache; the codes
    // alone are 1 bit (vecinfer) and 4 bytes (comm_vq) per key.
    if (m.name != "fp16" && m.name != "vecinfer" && m.name != "comm_vq") {
      EXPECT_LT(s.kv_bytes(), s.kv_fp16_bytes());
    }
  }
}

TEST(Session, ResetStartsOver) {
  Session s(stories());
  const std::vector<int32_t> tokens{1, 300, 42, 17};
  const auto first = s.eval(tokens);
  s.eval(tokens);
  s.reset();
  EXPECT_EQ(s.position(), 0u);
  EXPECT_EQ(s.eval(tokens), first);
}

TEST(Session, RejectsBadTokensAndAFullContext) {
  Session s(stories(), SessionOptions{"fp16", 8});
  const std::vector<int32_t> bad{1, 512};
  EXPECT_CONTAINS(test::error_message<Error>([&] { s.eval(bad); }),
                  "token id 512 at index 1 is out of range; expected 0..511");
  EXPECT_EQ(s.position(), 0u);
  s.eval(std::vector<int32_t>(6, 3));
  EXPECT_CONTAINS(test::error_message<Error>([&] { s.eval(std::vector<int32_t>(3, 3)); }),
                  "the context holds 8 tokens; 6 are used and 3 more do not fit");
  EXPECT_THROW(s.eval(std::vector<int32_t>{}), Error);
  EXPECT_THROW(Session(stories(), SessionOptions{"kivi:kbits=3", 0}), SpecError);
}

TEST(Session, DeviceNamesAreCheckedAndCudaNeedsTheBackend) {
  EXPECT_EQ(parse_device("cpu"), Device::Cpu);
  EXPECT_EQ(parse_device("cuda"), Device::Cuda);
  EXPECT_CONTAINS(test::error_message<Error>([] { parse_device("gpu"); }), "device 'gpu'; expected cpu or cuda");
  EXPECT_EQ(parse_gpu_weights("f32"), GpuWeights::F32);
  EXPECT_CONTAINS(test::error_message<Error>([] { parse_gpu_weights("bf16"); }),
                  "gpu weights 'bf16'; expected f16 or f32");
  const Model& m = stories();
  SessionOptions cuda{"fp16", 0, Device::Cuda};
  // Without the backend the session says how to get it; with it (and a GPU) it runs on the
  // GPU, which bench/cuda/runtime_h200.sh checks against this CPU runtime.
  if (!cuda_built()) {
    EXPECT_CONTAINS(test::error_message<Error>([&] { Session s(m, cuda); }),
                    "this build has no CUDA backend; configure with -DVELOXQUANT_CUDA=ON");
  }
  // A method without CUDA kernels is refused whether or not the backend is built, and the
  // message lists those that have them (stories260K's head_dim 8 is refused by the backend
  // itself only after the method is accepted).
  if (cuda_built()) {
    SessionOptions polar{"polar", 0, Device::Cuda};
    EXPECT_CONTAINS(test::error_message<SpecError>([&] { Session s(m, polar); }),
                    "the CUDA backend runs fp16, kivi, turboquant_mse");
  }
  Session cpu(m, SessionOptions{"fp16", 0});
  EXPECT_EQ(cpu.device(), Device::Cpu);
  EXPECT_EQ(cpu.spec().to_string(), "fp16");
}

// A batch of 0 is refused, and eval_batch() of a batch-1 session is eval().
// Several sequences in lockstep on the CPU: the projections run on all their rows at once and each
// sequence attends through its own caches, so each gets what it gets alone (up to the summation
// order of the larger products), prompt and decoded tokens, whatever the cache method.
TEST(Session, CpuBatchDecodesEachSequenceAsItWouldAlone) {
  const Model& m = stories();
  constexpr size_t batch = 3, n = 40;
  std::vector<int32_t> prompts;
  for (size_t b = 0; b < batch; ++b)
    for (size_t t = 0; t < n; ++t) prompts.push_back(static_cast<int32_t>(1 + (t * 37 + b * 101) % 500));
  for (const char* spec :
       {"fp16", "kivi:kbits=4,vbits=4,residual=16", "snapkv:budget=16,window=4", "h2o:budget=24"}) {
    SessionOptions o{spec, 128};
    o.batch = batch;
    Session together(m, o);
    const std::vector<float> all = together.eval_batch(prompts, Logits::All);
    const size_t vocab = m.config().vocab;
    ASSERT_EQ(all.size(), batch * n * vocab);
    std::vector<Session> alone;
    std::vector<std::vector<float>> alone_logits;
    size_t bytes = 0;
    for (size_t b = 0; b < batch; ++b) {
      alone.emplace_back(m, SessionOptions{spec, 128});
      alone_logits.push_back(alone.back().eval(std::span(prompts).subspan(b * n, n), Logits::All));
      bytes += alone.back().kv_bytes();
    }
    const auto near = [&](const float* a, const float* b, size_t count, const std::string& what) {
      float scale = 0, diff = 0;
      for (size_t i = 0; i < count; ++i)
        scale = std::max(scale, std::fabs(b[i])), diff = std::max(diff, std::fabs(a[i] - b[i]));
      EXPECT_LE(diff, 1e-4f * scale) << spec << ": " << what;
    };
    for (size_t b = 0; b < batch; ++b)
      near(&all[b * n * vocab], alone_logits[b].data(), n * vocab, "prompt " + std::to_string(b));
    EXPECT_EQ(together.kv_bytes(), bytes) << spec;
    // Decoding in lockstep: each sequence's own next tokens, one step for all of them.
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> next;
      for (size_t b = 0; b < batch; ++b) next.push_back(static_cast<int32_t>(7 + step * 13 + b * 29));
      const std::vector<float> last = together.eval_batch(next, Logits::Last);
      for (size_t b = 0; b < batch; ++b) {
        const std::vector<float> own = alone[b].eval(std::span(next).subspan(b, 1), Logits::Last);
        near(&last[b * vocab], own.data(), vocab,
             "step " + std::to_string(step) + ", sequence " + std::to_string(b));
      }
    }
    // Sampling picks one token per sequence from its own logits, as each alone.
    const std::vector<int32_t> next{11, 12, 13};
    together.eval_batch(next, Logits::Sample);
    std::vector<Sampler> samplers(batch, Sampler(SamplerOptions{.temperature = 0.0f}));
    const std::vector<int32_t> picked = together.sample_batch(samplers);
    ASSERT_EQ(picked.size(), batch);
    for (size_t b = 0; b < batch; ++b) {
      alone[b].eval(std::span(next).subspan(b, 1), Logits::Sample);
      Sampler greedy(SamplerOptions{.temperature = 0.0f});
      EXPECT_EQ(picked[b], alone[b].sample(greedy)) << spec << ", sequence " << b;
      EXPECT_TRUE(std::ranges::equal(together.tokens(b), alone[b].tokens(0))) << spec << ", sequence " << b;
    }
  }
  // What works on one sequence's caches says so.
  SessionOptions two{"fp16", 64};
  two.batch = 2;
  Session s(m, two);
  EXPECT_CONTAINS(test::error_message<Error>([&] { s.caches(); }),
                  "caches() works on the caches of one sequence; this session decodes 2 in lockstep");
  EXPECT_CONTAINS(test::error_message<Error>([&] { s.restore({}, {}); }),
                  "restore works on the caches of one sequence");
}

TEST(Session, BatchIsCheckedAndEvalBatchOfOneSequenceIsEval) {
  const Model& m = stories();
  SessionOptions none{"fp16", 0};
  none.batch = 0;
  EXPECT_CONTAINS(test::error_message<Error>([&] { Session s(m, none); }),
                  "session batch 0; expected at least 1");
  const std::vector<int32_t> tokens{1, 300, 42, 17, 9};
  Session a(m), b(m);
  EXPECT_EQ(a.batch(), 1u);
  EXPECT_EQ(a.eval(tokens, Logits::All), b.eval_batch(tokens, Logits::All));
  EXPECT_EQ(a.eval(std::vector<int32_t>{5}), b.eval_batch(std::vector<int32_t>{5}));
  EXPECT_TRUE(std::ranges::equal(b.tokens(0), std::vector<int32_t>{1, 300, 42, 17, 9, 5}));
  EXPECT_CONTAINS(test::error_message<Error>([&] { b.tokens(1); }),
                  "tokens of sequence 1; the session decodes 1 (0..0)");
}

}  // namespace
}  // namespace veloxquant
