// Eviction inside the model: every policy, alone and over a quantizer, runs prompts and decoding
// on stories260K; streaming_llm decodes far past the context in constant memory; sessions that
// evict are refused by session files, which do not hold a policy's state.
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/method.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

const Model& stories() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

std::vector<int32_t> prompt_tokens() {
  return stories().tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park with her friends. One day, she saw a big red ball under a tree and ran to get it.", true);
}

TEST(EvictionSession, EveryPolicyRunsInsideTheModelAloneAndOverAQuantizer) {
  const std::vector<int32_t> prompt = prompt_tokens();
  ASSERT_GT(prompt.size(), 40u);
  for (const MethodInfo& policy : registered_policies()) {
    // Budgets below the prompt, and above what the policy keeps anyway with KIVI's key blocks.
    for (const std::string quantizer : {"", "+kivi:group=16,residual=16"}) {
      const std::string kv = policy.name + (quantizer.empty() ? ":budget=24" : ":budget=48") + (policy.name == "snapkv" || policy.name == "pyramidkv" || policy.name == "adakv" ? ",window=8" : "") + quantizer;
      Session s(stories(), SessionOptions{kv, 0});
      std::vector<float> logits = s.eval(prompt);
      for (int i = 0; i < 30; ++i) {
        const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        logits = s.eval(std::span(&next, 1));
      }
      for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << kv;
      EXPECT_LT(s.kv_bytes(), s.kv_fp16_bytes()) << kv;
    }
  }
}

TEST(EvictionSession, StreamingLlmDecodesPastTheContextInConstantMemory) {
  Session s(stories(), SessionOptions{"streaming_llm:budget=48,sinks=4", 64});
  std::vector<float> logits = s.eval(prompt_tokens());
  size_t full_bytes = 0;
  for (int i = 0; i < 300; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = s.eval(std::span(&next, 1));
    if (i == 20) full_bytes = s.kv_bytes();
    if (i > 20) {
      ASSERT_EQ(s.kv_bytes(), full_bytes) << "step " << i;
    }
  }
  EXPECT_GT(s.position(), 2 * s.context());
  EXPECT_GT(s.room(), 0u);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(EvictionSession, APlainCacheStillStopsAtTheContext) {
  Session s(stories(), SessionOptions{"fp16", 64});
  const std::vector<int32_t> prompt = prompt_tokens();
  s.eval(std::span(prompt).first(60));
  EXPECT_EQ(s.room(), 4u);
  EXPECT_CONTAINS(test::error_message<Error>([&] { s.eval(std::span(prompt).first(5)); }), "do not fit");
}

TEST(EvictionSession, SessionFilesRefuseCachesThatEvict) {
  Session s(stories(), SessionOptions{"h2o:budget=32", 0});
  const std::vector<float> logits = s.eval(prompt_tokens());
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_session(s, logits, "/nonexistent/x.vqs"); }),
                  "eviction policy's state");
}

}  // namespace
}  // namespace veloxquant
