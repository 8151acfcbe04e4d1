// generate() (veloxquant/generate.h), the loop the CLI and the Python package share, on
// stories260K: greedy generation reproduces the documented continuation, every token reaches the
// callback in order, and generation stops at max_tokens or when the context is full.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_files.h"
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

TEST(Generate, StopsWhenTheContextIsFull) {
  const size_t prompt = stories().tokenizer().encode("Once upon a time", true).size();
  // Room for 5 more tokens: five are evaluated, and the sixth is sampled from the last logits.
  const Generated r = run("Once upon a time", 100, prompt + 5);
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.position, prompt + 5);
}

}  // namespace
}  // namespace veloxquant
