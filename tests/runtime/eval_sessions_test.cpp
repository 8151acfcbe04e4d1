// eval_sessions: sequences at different positions, some in a prompt chunk and some decoding one
// token, run as one forward step and each get what its own eval() gives; misuse is refused before
// anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/model.h"

namespace veloxquant {
namespace {

const Model& stories() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

std::vector<int32_t> tokens(size_t n, size_t salt) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(1 + (i * 37 + salt * 101) % 500));
  return t;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0, diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    scale = std::max(scale, std::fabs(want[i])), diff = std::max(diff, std::fabs(got[i] - want[i]));
  EXPECT_LE(diff, 1e-4f * scale) << what;
}

TEST(EvalSessions, RaggedStepEqualsEachSessionAlone) {
  const Model& m = stories();
  for (const char* spec : {"fp16", "kivi:kbits=4,vbits=4,residual=16", "snapkv:budget=16,window=4"}) {
    SCOPED_TRACE(spec);
    // Three sequences: one mid-decode, one starting a prompt of 50 tokens in two chunks, one
    // whose prompt comes whole; the same tokens through sessions of their own.
    std::vector<Session> together, alone;
    for (int i = 0; i < 3; ++i) {
      together.emplace_back(m, SessionOptions{spec, 128});
      alone.emplace_back(m, SessionOptions{spec, 128});
    }
    const std::vector<int32_t> early = tokens(30, 0), chunked = tokens(50, 1), whole = tokens(20, 2);
    together[0].eval(early);
    alone[0].eval(early);
    const int32_t next[] = {7, 9, 11};
    std::vector<std::vector<float>> got = eval_sessions(
        std::vector<SessionStep>{{&together[0], std::span(next, 1), Logits::Last},
                                 {&together[1], std::span(chunked).first(32), Logits::None, 18},
                                 {&together[2], whole, Logits::All}});
    ASSERT_EQ(got.size(), 3u);
    expect_near(got[0], alone[0].eval(std::span(next, 1)), "decode");
    EXPECT_TRUE(got[1].empty());
    expect_near(got[2], alone[2].eval(whole, Logits::All), "whole prompt");
    // The chunked prompt's end beside two decode steps. Its first chunk's blocks are compressed
    // before the second attends (kivi: as two evals); SnapKV selects once, after the whole prompt
    // (as one eval of all of it).
    got = eval_sessions(std::vector<SessionStep>{{&together[1], std::span(chunked).subspan(32), Logits::Last},
                                                 {&together[0], std::span(next + 1, 1), Logits::Last},
                                                 {&together[2], std::span(next + 2, 1), Logits::Last}});
    std::vector<float> chunked_alone;
    if (together[1].spec().eviction) {
      chunked_alone = alone[1].eval(chunked);
    } else {
      alone[1].eval(std::span(chunked).first(32), Logits::None);
      chunked_alone = alone[1].eval(std::span(chunked).subspan(32));
    }
    expect_near(got[0], chunked_alone, "chunked prompt");
    expect_near(got[1], alone[0].eval(std::span(next + 1, 1)), "second decode");
    expect_near(got[2], alone[2].eval(std::span(next + 2, 1)), "decode after a prompt");
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(together[i].position(), alone[i].position());
      EXPECT_EQ(together[i].kv_bytes(), alone[i].kv_bytes());
      EXPECT_TRUE(std::ranges::equal(together[i].tokens(), alone[i].tokens()));
    }
    // Logits::Sample keeps them for sample(), as eval() does.
    eval_sessions(std::vector<SessionStep>{{&together[0], std::span(next, 1), Logits::Sample}});
    Sampler greedy(SamplerOptions{.temperature = 0.0f});
    const std::vector<float> own = alone[0].eval(std::span(next, 1));
    EXPECT_EQ(together[0].sample(greedy),
              static_cast<int32_t>(std::max_element(own.begin(), own.end()) - own.begin()));
  }
}

TEST(EvalSessions, RefusesMisuseBeforeRunning) {
  const Model& m = stories();
  Session a(m, SessionOptions{"fp16", 64}), b(m, SessionOptions{"fp16", 32});
  const std::vector<int32_t> some = tokens(4, 0);
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&a, some}, {&a, some}});
                  }),
                  "repeats the session");
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&a, some}, {&b, some}});
                  }),
                  "another model or context");
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&a, {}}});
                  }),
                  "no tokens");
  const std::vector<int32_t> bad{1, 1 << 20};
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&a, some}, {&a, bad}});
                  }),
                  "step 1");
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&a, tokens(65, 0)}});
                  }),
                  "room for 64");
  SessionOptions batched{"fp16", 64};
  batched.batch = 2;
  Session two(m, batched);
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    eval_sessions(std::vector<SessionStep>{{&two, some}});
                  }),
                  "expected device cpu with batch 1");
  EXPECT_EQ(a.position(), 0u);  // nothing ran
}

}  // namespace
}  // namespace veloxquant
