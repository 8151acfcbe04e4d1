// generate() (veloxquant/generate.h), the loop the CLI and the Python package share, on
// stories260K: greedy generation reproduces the documented continuation, every token reaches the
// callback in order, generation stops at max_tokens or when the context is full, and
// Session::sample picks what the sampler picks from the logits eval returns.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "model_files.h"
#include "veloxquant/error.h"
#include "veloxquant/generate.h"
#include "veloxquant/model.h"

namespace veloxquant {
namespace {

const Model& stories() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

struct Generated {
  std::vector<int32_t> tokens, seen;
  size_t position = 0;
};

Generated run(const std::string& prompt, size_t max_tokens, size_t context = 0) {
  Session session(stories(), SessionOptions{"fp16", context});
  Sampler sampler(SamplerOptions{.temperature = 0});
  const std::vector<int32_t> ids = stories().tokenizer().encode(prompt, true);
  for (int32_t t : ids) sampler.accept(t);
  Generated r;
  r.tokens = generate(session, sampler, session.eval(ids), GenerateOptions{max_tokens, false},
                      [&](int32_t t) { r.seen.push_back(t); });
  r.position = session.position();
  return r;
}

TEST(Generate, GreedyReproducesTheDocumentedContinuation) {
  const Generated r = run("Once upon a time", 20);
  ASSERT_EQ(r.tokens.size(), 20u);
  EXPECT_EQ(r.seen, r.tokens);
  const std::string text = stories().tokenizer().decode(r.tokens, /*strip_leading_space=*/false);
  ASSERT_GE(text.size(), 30u);
  EXPECT_EQ(text, std::string(test::kStoriesDocumentedSample).substr(0, text.size()));
}

TEST(Generate, TheLastTokenIsNotEvaluated) {
  const size_t prompt = stories().tokenizer().encode("Once upon a time", true).size();
  EXPECT_EQ(run("Once upon a time", 5).position, prompt + 4);
  const Generated none = run("Once upon a time", 0);
  EXPECT_TRUE(none.tokens.empty() && none.seen.empty());
  EXPECT_EQ(none.position, prompt);
}

TEST(Generate, SessionSampleIsTheSamplerOnTheKeptLogits) {
  const std::vector<int32_t> ids = stories().tokenizer().encode("Once upon a time", true);
  Session kept(stories(), SessionOptions{"fp16"}), returned(stories(), SessionOptions{"fp16"});
  const SamplerOptions o{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .repeat_penalty = 1.1f, .seed = 5};
  Sampler a(o), b(o);
  EXPECT_THROW(kept.sample(a), Error);  // nothing evaluated yet
  EXPECT_TRUE(kept.eval(ids, Logits::Sample).empty());
  std::vector<float> logits = returned.eval(ids);
  for (int i = 0; i < 12; ++i) {
    const int32_t x = kept.sample(a), y = b.sample(logits);
    ASSERT_EQ(x, y) << "token " << i;
    a.accept(x), b.accept(y);
    kept.eval(std::span(&x, 1), Logits::Sample);
    logits = returned.eval(std::span(&y, 1));
  }
  kept.eval(std::span(ids.data(), 1), Logits::Last);
  EXPECT_THROW(kept.sample(a), Error);  // the last eval kept none
  std::vector<Sampler> two(2, a);
  EXPECT_THROW(kept.sample_batch(two), Error);  // one sampler per sequence
}

TEST(Generate, StopsWhenTheContextIsFull) {
  const size_t prompt = stories().tokenizer().encode("Once upon a time", true).size();
  // Room for 5 more tokens: five are evaluated, and the sixth is sampled from the last logits.
  const Generated r = run("Once upon a time", 100, prompt + 5);
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.position, prompt + 5);
}

}  // namespace
}  // namespace veloxquant
