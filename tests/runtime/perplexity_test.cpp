// Perplexity: the llama.cpp chunking and scoring recomputed by hand, the baseline file compared
// with itself (KL 0, full agreement), and every way a baseline can fail to match.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/perplexity.h"

namespace veloxquant {
namespace {

const Model& stories() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

const std::string& text() {
  static const std::string t = [] {
    std::string s;
    for (int i = 0; i < 12; ++i)
      s += "Once upon a time, there was a little dog named Max. Max liked to run in the park with "
           "his friend Sue. One day it began to rain, so they ran home and sat by the fire. ";
    return s;
  }();
  return t;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vq_ppl_" + std::to_string(::getpid()) + name)).string();
}

TEST(Perplexity, MatchesTheLlamaCppRecipeComputedByHand) {
  const size_t ctx = 64;
  PerplexityOptions o;
  o.context = ctx;
  o.chunks = 3;
  const PerplexityResult r = compute_perplexity(stories(), text(), o);
  ASSERT_EQ(r.chunks, 3u);
  ASSERT_EQ(r.scored_tokens, 3 * (ctx - 1 - ctx / 2));

  const Tokenizer& tok = stories().tokenizer();
  const std::vector<int32_t> tokens = tok.encode(text(), true);
  EXPECT_EQ(r.text_tokens, tokens.size());
  const size_t vocab = stories().config().vocab;
  double nll = 0;
  for (size_t c = 0; c < 3; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    chunk[0] = tok.bos();
    Session s(stories());
    const std::vector<float> logits = s.eval(chunk, Logits::All);
    for (size_t j = ctx / 2; j < ctx - 1; ++j) {
      const float* row = &logits[j * vocab];
      double z = 0;
      for (size_t i = 0; i < vocab; ++i) z += std::exp(static_cast<double>(row[i]));
      nll += std::log(z) - row[tokens[c * ctx + j + 1]];
    }
  }
  const double expected = std::exp(nll / static_cast<double>(r.scored_tokens));
  EXPECT_NEAR(r.perplexity, expected, 1e-6 * expected);
  EXPECT_GT(r.perplexity, 1.0);
  EXPECT_LT(r.perplexity, 20.0);  // a story model on story text
  EXPECT_GT(r.perplexity_error, 0.0);
  EXPECT_EQ(r.kv_bytes, r.kv_fp16_bytes);
}

// Saves an fp16 baseline of two 64-token chunks to `base`; returns the options that compare
// against it, and the saving run's result.
std::pair<PerplexityOptions, PerplexityResult> save_baseline(const std::string& base) {
  PerplexityOptions o;
  o.context = 64;
  o.chunks = 2;
  o.save_base = base;
  const PerplexityResult saved = compute_perplexity(stories(), text(), o);
  o.save_base.clear();
  o.kl_base = base;
  return {o, saved};
}

TEST(Perplexity, BaselineAgainstItselfHasZeroKLAndFullAgreement) {
  const std::string base = temp_path("base.bin");
  auto [o, saved] = save_baseline(base);
  EXPECT_FALSE(std::filesystem::exists(base + ".tmp"));
  const PerplexityResult same = compute_perplexity(stories(), text(), o);
  ASSERT_TRUE(same.compared);
  EXPECT_EQ(same.perplexity, saved.perplexity);
  EXPECT_LT(same.kl_mean, 1e-12);
  EXPECT_EQ(same.top1_agreement, 1.0);

  o.kv_spec = "kivi:kbits=2,vbits=2,residual=0";
  const PerplexityResult kivi = compute_perplexity(stories(), text(), o);
  EXPECT_GT(kivi.kl_mean, 0.0);
  EXPECT_LT(kivi.kv_bytes, kivi.kv_fp16_bytes);
  std::filesystem::remove(base);
}

TEST(Perplexity, RejectsABaselineThatDoesNotMatch) {
  const std::string base = temp_path("mismatch.bin");
  const PerplexityOptions o = save_baseline(base).first;
  const auto error = [&](const PerplexityOptions& p, const std::string& t = text()) {
    return test::error_message<Error>([&] { compute_perplexity(stories(), t, p); });
  };
  PerplexityOptions other = o;
  other.context = 32;
  EXPECT_CONTAINS(error(other), "was written with context 64; this run has 32");
  other = o;
  other.chunks = 1;
  EXPECT_CONTAINS(error(other), "chunk count 2; this run has 1");
  EXPECT_CONTAINS(error(o, "Different words. " + text()), "other tokens");
  std::filesystem::resize_file(base, std::filesystem::file_size(base) - 4);
  EXPECT_CONTAINS(error(o), "truncated or corrupt");
  { std::ofstream(base) << "not a baseline"; }
  EXPECT_CONTAINS(error(o), "is not a baseline");
  std::filesystem::remove(base);
  EXPECT_CONTAINS(error(o), "cannot read the baseline file");
}

TEST(Perplexity, NeedsTwoContextsOfText) {
  PerplexityOptions o;
  o.context = 512;
  EXPECT_CONTAINS(test::error_message<Error>([&] { compute_perplexity(stories(), "A short text.", o); }),
                  "needs at least 1024");
}

}  // namespace
}  // namespace veloxquant
