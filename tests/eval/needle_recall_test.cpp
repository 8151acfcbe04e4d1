// Needle recall: the sequences hold BOS, text, the needle at its depth and the needle again; on
// the project's own vq-hd128 model (trained to copy from its context, models/README.md) the fp16
// cache recalls nearly every needle token, the control (no planted copy) almost none, a cache that
// evicted the needle almost none either; the cells come out in order with their byte counts, and
// bad options are errors naming the value.
#include "eval/needle_recall.h"

#include <gtest/gtest.h>

#include <numeric>

#include "eval/eval_inputs.h"
#include "expect_error.h"

namespace veloxquant {
namespace {

TEST(NeedleSequence, HoldsBosTheTextWithTheNeedleAtItsDepthAndTheNeedleLast) {
  std::vector<int32_t> text(100);
  std::iota(text.begin(), text.end(), 100);
  const std::vector<int32_t> needle = {7, 8, 9};
  auto expected = [&](std::vector<int32_t> head, size_t at, bool plant) {
    head.insert(head.end(), text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at));
    if (plant) head.insert(head.end(), needle.begin(), needle.end());
    head.insert(head.end(), text.begin() + static_cast<std::ptrdiff_t>(at), text.end());
    head.insert(head.end(), needle.begin(), needle.end());
    return head;
  };
  EXPECT_EQ(needle_sequence(0, text, needle, 0.25, true), expected({0}, 25, true));
  EXPECT_EQ(needle_sequence(0, text, needle, 0.0, true), expected({0}, 0, true));
  EXPECT_EQ(needle_sequence(0, text, needle, 1.0, true), expected({0}, 100, true));
  EXPECT_EQ(needle_sequence(-1, text, needle, 0.5, true), expected({}, 50, true));
  EXPECT_EQ(needle_sequence(0, text, needle, 0.5, false), expected({0}, 0, false));
}

class NeedleRecall : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = test::missing_eval_input(); !missing.empty())
      GTEST_SKIP() << "not present: " << missing;
    // 20 kB of text, about 6,000 tokens: enough for two trials at different offsets.
    if (haystack_.empty()) haystack_ = test::eval_text_tokens(20000);
  }
  static NeedleOptions options() {
    NeedleOptions o;
    o.lengths = {512};
    o.depths = {0.5};
    return o;
  }

  static const Model& model() { return test::eval_model(); }
  static inline std::vector<int32_t> haystack_;
};

TEST_F(NeedleRecall, CellsComeLengthByLengthWithTheirBytes) {
  NeedleOptions o = options();
  o.lengths = {128, 256};
  o.depths = {0.0, 1.0};
  o.needle_tokens = 16;
  std::vector<size_t> calls;
  o.progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, 8u);
    calls.push_back(done);
  };
  const NeedleResult r = needle_recall(model(), haystack_, o);
  EXPECT_EQ(calls, (std::vector<size_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(r.cells.size(), 4u);
  double sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    const NeedleCell& c = r.cells[i];
    EXPECT_EQ(c.length, o.lengths[i / 2]);
    EXPECT_EQ(c.depth, o.depths[i % 2]);
    EXPECT_EQ(c.scored, 2u * 15u);  // two trials, the final copy's first token unscored
    EXPECT_GT(c.kv_bytes, 0u);
    EXPECT_EQ(c.kv_bytes, c.kv_fp16_bytes);
    EXPECT_GE(c.recall, 0.0);
    EXPECT_LE(c.recall, 1.0);
    sum += c.recall;
  }
  EXPECT_EQ(r.cells[2].kv_bytes, 2 * r.cells[0].kv_bytes);
  EXPECT_DOUBLE_EQ(r.mean_recall, sum / 4);
}

TEST_F(NeedleRecall, TheFp16CacheRecallsTheNeedle) {
  EXPECT_GT(needle_recall(model(), haystack_, options()).mean_recall, 0.8);  // measured 0.98
}

// A 1024-token sequence with the needle at depth 0.1: a rolling window of 256 tokens has dropped
// it by the time the final copy is read (the 512-token prompt steps evict in between), so recall
// falls to the control's level; the same budget under a needle at depth 0.9 still holds it.
TEST_F(NeedleRecall, EvictingTheNeedleLosesItKeepingItDoesNot) {
  NeedleOptions o = options();
  o.lengths = {1024};
  o.depths = {0.1, 0.9};
  o.kv_spec = "streaming_llm:budget=256";
  const NeedleResult r = needle_recall(model(), haystack_, o);
  EXPECT_LT(r.cells[0].recall, 0.1);
  EXPECT_GT(r.cells[1].recall, 0.8);
}

// The same sequences with text where the first copy was: the final copy is unseen random tokens.
TEST_F(NeedleRecall, ControlWithoutThePlantedCopyRecallsAlmostNothing) {
  NeedleOptions o = options();
  o.plant = false;
  EXPECT_LT(needle_recall(model(), haystack_, o).mean_recall, 0.1);
}

TEST_F(NeedleRecall, BadOptionsAreErrorsNamingTheValue) {
  auto message = [&](auto edit) {
    NeedleOptions o = options();
    edit(o);
    return test::error_message<Error>([&] { needle_recall(model(), haystack_, o); });
  };
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.lengths = {60}; }), "sequence length 60");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.lengths = {8192}; }), "context of 4096");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.depths = {1.5}; }), "depth 1.5");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.depths = {-0.25}; }), "depth -0.25");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.needle_tokens = 1; }), "needle of 1 tokens");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.trials = 0; }), "trials 0");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.lengths.clear(); }), "no lengths");
  EXPECT_CONTAINS(message([](NeedleOptions& o) { o.depths.clear(); }), "no depths");
  const std::vector<int32_t> short_text(haystack_.begin(), haystack_.begin() + 100);
  EXPECT_CONTAINS(test::error_message<Error>([&] { needle_recall(model(), short_text, options()); }),
                  "the haystack has 100 tokens");
}

}  // namespace
}  // namespace veloxquant
