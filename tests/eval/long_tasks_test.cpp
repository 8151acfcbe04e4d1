// Long-context tasks: every sample is exactly its length (prompt and answer), holds what its
// answer must contain where the task says, ends with the answer's lead-in, and is the same for
// the same seed and index; scoring is the share of answers found; bad options are errors naming
// the value. On vq-hd128 the runner returns one cell per task and length, in order.
#include "eval/long_tasks.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <regex>

#include "eval/eval_inputs.h"
#include "expect_error.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class LongTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = test::missing_eval_input(); !missing.empty())
      GTEST_SKIP() << "not present: " << missing;
    if (!model_) {
      model_.emplace(Model::load(test::kEvalModel));
      text_ = test::eval_text_head(60000);  // about 17,000 tokens
      filler_ = model_->tokenizer().encode(text_, /*add_special=*/false);
      words_ = task_words(text_);
    }
  }
  static std::string decode(const std::vector<int32_t>& ids) { return model_->tokenizer().decode(ids); }

  static inline std::optional<Model> model_;
  static inline std::string text_;
  static inline std::vector<int32_t> filler_;
  static inline std::vector<std::string> words_;
};

TEST_F(LongTasks, EverySampleIsExactlyItsLengthAndHoldsItsAnswers) {
  for (const std::string& task : long_task_names()) {
    for (const size_t length : {1536, 3072}) {
      for (size_t index = 0; index < 2; ++index) {
        SCOPED_TRACE(task + " at " + std::to_string(length) + ", sample " + std::to_string(index));
        const LongTaskSample s = build_long_task(*model_, task, length, index, 1, filler_, words_);
        EXPECT_EQ(s.prompt.size() + s.max_new_tokens, length);
        EXPECT_EQ(s.prompt.front(), model_->tokenizer().bos());
        const std::string prompt = decode(s.prompt);
        ASSERT_FALSE(s.answers.empty());
        if (task == "niah_multikey") {
          ASSERT_EQ(s.answers.size(), 1u);
          EXPECT_EQ(count(prompt, "One of the special magic numbers for "), 4u);
          EXPECT_EQ(count(prompt, " is: " + s.answers[0] + "."), 1u);
          EXPECT_TRUE(prompt.ends_with(" mentioned in the provided text is:"));
        } else if (task == "niah_multivalue") {
          ASSERT_EQ(s.answers.size(), 4u);
          for (const std::string& value : s.answers)
            EXPECT_EQ(count(prompt, " is: " + value + "."), 1u) << value;
          EXPECT_TRUE(prompt.ends_with(" mentioned in the provided text are:"));
        } else if (task == "variable_tracking") {
          ASSERT_EQ(s.answers.size(), 5u);
          // The chain in order: the first name holds the value, each next one the one before.
          size_t at = prompt.find("VAR " + s.answers[0] + " = ");
          ASSERT_NE(at, std::string::npos);
          for (size_t i = 1; i < s.answers.size(); ++i) {
            const size_t next = prompt.find("VAR " + s.answers[i] + " = VAR " + s.answers[i - 1] + ".");
            ASSERT_NE(next, std::string::npos) << s.answers[i];
            EXPECT_GT(next, at);
            at = next;
          }
          EXPECT_TRUE(prompt.ends_with("they are:"));
        } else {
          ASSERT_EQ(s.answers.size(), 10u);
          // Every list entry's word counted: the ten answers are the ten most frequent.
          std::map<std::string, size_t> freq;
          const std::regex entry(R"((\n|^)\d+\. ([a-z]+)(?=\n))");
          for (auto it = std::sregex_iterator(prompt.begin(), prompt.end(), entry);
               it != std::sregex_iterator(); ++it)
            ++freq[(*it)[2]];
          size_t least_common = SIZE_MAX, most_other = 0;
          for (const auto& [word, n] : freq) {
            const bool answer = std::find(s.answers.begin(), s.answers.end(), word) != s.answers.end();
            if (answer) least_common = std::min(least_common, n);
            else most_other = std::max(most_other, n);
          }
          for (const std::string& word : s.answers) EXPECT_TRUE(freq.contains(word)) << word;
          EXPECT_GT(least_common, most_other);
          EXPECT_GE(freq.size(), 20u);
          EXPECT_TRUE(prompt.ends_with("most often in the list are:"));
        }
      }
    }
  }
}

TEST_F(LongTasks, TheSameSeedAndIndexGiveTheSameSampleAndOthersDiffer) {
  for (const std::string& task : long_task_names()) {
    const LongTaskSample a = build_long_task(*model_, task, 2048, 0, 1, filler_, words_);
    EXPECT_EQ(build_long_task(*model_, task, 2048, 0, 1, filler_, words_).prompt, a.prompt) << task;
    EXPECT_NE(build_long_task(*model_, task, 2048, 1, 1, filler_, words_).prompt, a.prompt) << task;
    EXPECT_NE(build_long_task(*model_, task, 2048, 0, 2, filler_, words_).answers, a.answers) << task;
  }
}

TEST(LongTaskScore, IsTheShareOfAnswersFoundIgnoringCase) {
  EXPECT_DOUBLE_EQ(score_long_task(" 4821937, then 1200000", {"4821937"}), 1.0);
  EXPECT_DOUBLE_EQ(score_long_task(" 482193", {"4821937"}), 0.0);
  EXPECT_DOUBLE_EQ(score_long_task("ABCDE and fghij", {"abcde", "FGHIJ", "KLMNO", "PQRST"}), 0.5);
  EXPECT_DOUBLE_EQ(score_long_task("", {"x"}), 0.0);
  EXPECT_DOUBLE_EQ(score_long_task("anything", {}), 0.0);
}

TEST_F(LongTasks, TheRunnerScoresEveryTaskAtEveryLengthInOrder) {
  LongTaskOptions o;
  o.tasks = {"niah_multikey", "common_words"};
  o.lengths = {1024, 768};
  o.samples = 1;
  size_t calls = 0;
  o.progress = [&](size_t done, size_t total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 4u);
  };
  const LongTaskResult r = run_long_tasks(*model_, text_, filler_, o);
  ASSERT_EQ(r.cells.size(), 4u);
  EXPECT_EQ(calls, 4u);
  const std::vector<std::pair<std::string, size_t>> order{
      {"niah_multikey", 1024}, {"niah_multikey", 768}, {"common_words", 1024}, {"common_words", 768}};
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(r.cells[i].task, order[i].first);
    EXPECT_EQ(r.cells[i].length, order[i].second);
    EXPECT_EQ(r.cells[i].samples, 1u);
    EXPECT_GE(r.cells[i].score, 0.0);
    EXPECT_LE(r.cells[i].score, 1.0);
    sum += r.cells[i].score;
  }
  EXPECT_DOUBLE_EQ(r.mean_score, sum / 4);
}

TEST_F(LongTasks, BadOptionsAreErrorsNamingTheValue) {
  EXPECT_CONTAINS(test::error_message<Error>(
                      [&] { build_long_task(*model_, "niah_single", 2048, 0, 1, filler_, words_); }),
                  "unknown long-context task 'niah_single'");
  EXPECT_CONTAINS(test::error_message<Error>(
                      [&] { build_long_task(*model_, "niah_multikey", 64, 0, 1, filler_, words_); }),
                  "niah_multikey at 64 tokens");
  EXPECT_CONTAINS(test::error_message<Error>(
                      [&] { build_long_task(*model_, "common_words", 200, 0, 1, filler_, words_); }),
                  "common_words at 200 tokens");
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    build_long_task(*model_, "variable_tracking", 2048, 0, 1, std::span(filler_).first(500),
                                    words_);
                  }),
                  "the text has 500");
  EXPECT_CONTAINS(test::error_message<Error>([&] { task_words("only a few words here"); }),
                  "need at least 64");
  LongTaskOptions o;
  o.tasks = {"niah_multikey"};
  o.lengths = {model_->config().context_length + 1};
  EXPECT_CONTAINS(test::error_message<Error>([&] { run_long_tasks(*model_, text_, filler_, o); }),
                  "exceeds the model's context of");
  o.lengths = {1024};
  o.samples = 0;
  EXPECT_CONTAINS(test::error_message<Error>([&] { run_long_tasks(*model_, text_, filler_, o); }),
                  "0 samples");
}

}  // namespace
}  // namespace veloxquant
