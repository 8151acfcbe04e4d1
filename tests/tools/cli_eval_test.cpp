// `veloxquant eval` end to end on stories260K (small settings), and its argument errors; the
// observers that `generate --observe` writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"

namespace veloxquant {
namespace {

using test::expect_one_line_error;
using test::run_cli;
using test::slurp;

const std::string kModel = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";
const std::string kText = VELOXQUANT_SHARED_DIR "/corpus/wikitext-2-raw/wiki.test.raw";
const std::string kSmall = " --ctx 128 --chunks 2 --retrieval 64,128 --depths 0.5 --trials 1 --needle 8 "
                           "--decode-tokens 8 -t 1 --no-plots";

TEST(CliEval, WritesEveryMethodAndRecommends) {
  const std::filesystem::path out =
      std::filesystem::path(::testing::TempDir()) / ("veloxquant_eval_" + std::to_string(::getpid()));
  const auto r = run_cli("eval -m '" + kModel + "' --text '" + kText +
                         "' --kv kivi:kbits=4,vbits=4,residual=32 streaming_llm:budget=32" +
                         kSmall + " --recommend 50 --max-kl 1 --out '" + out.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp((out / "results.json").string()));
  ASSERT_EQ(j.at("methods").size(), 3u);
  EXPECT_EQ(j.at("methods").at(0).at("spec"), "fp16");
  EXPECT_EQ(j.at("setup").at("chunks"), 2);
  EXPECT_EQ(j.at("setup").at("scored_tokens"), 2 * 63);
  const auto& fp16 = j.at("methods").at(0);
  const auto& kivi = j.at("methods").at(1);
  // The baseline against itself: no change; a 4-bit cache: smaller, close, compared.
  EXPECT_EQ(fp16.at("perplexity_delta_pct"), 0.0);
  EXPECT_EQ(fp16.at("kv_bytes"), fp16.at("fp16_bytes"));
  EXPECT_LT(kivi.at("kv_bytes").get<size_t>(), fp16.at("kv_bytes").get<size_t>());
  EXPECT_GT(kivi.at("kl_mean").get<double>(), 0.0);
  EXPECT_GT(kivi.at("top1_agreement").get<double>(), 0.5);
  EXPECT_EQ(kivi.at("retrieval").size(), 2u);
  EXPECT_GT(kivi.at("decode_tokens_per_s").get<double>(), 0.0);
  EXPECT_GT(kivi.at("peak_rss_mib").get<double>(), 0.0);
  // What the caches' buffers held: at least what they store, and less with KIVI than with fp16.
  EXPECT_GE(fp16.at("kv_peak_held_bytes").get<size_t>(), fp16.at("kv_bytes").get<size_t>());
  EXPECT_LT(kivi.at("kv_peak_held_bytes").get<size_t>(), fp16.at("kv_peak_held_bytes").get<size_t>());
  EXPECT_TRUE(j.at("recommendation").is_string());
  EXPECT_NE(r.out.find("recommendation: the smallest cache"), std::string::npos) << r.out;
  EXPECT_NE(slurp((out / "results.md").string()).find("| spec | K bytes |"), std::string::npos);
  // Progress on stderr: a line per method and stage.
  EXPECT_NE(r.err.find("[2/3] kivi:kbits=4,vbits=4,group=32,residual=32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("retrieval  elapsed"), std::string::npos) << r.err;
  std::filesystem::remove_all(out);
}

TEST(CliEval, ArgumentErrorsAreOneLine) {
  expect_one_line_error("eval -m '" + kModel + "'", "--text");
  expect_one_line_error("eval --text '" + kText + "'", "--model");
  expect_one_line_error("eval -m '" + kModel + "' --text '" + kText + "' --kv kivi:kbits=3", "kbits=3");
  expect_one_line_error("eval -m '" + kModel + "' --text /nonexistent.txt", "/nonexistent.txt");
  expect_one_line_error("eval -m '" + kModel + "' --text '" + kText + "' --ctx 100000", "ctx 100000 exceeds");
  expect_one_line_error("eval -m '" + kModel + "' --text '" + kText + "' --kv fp16 --ctx 64 --decode-tokens 64",
                        "decode_tokens 64 leaves no prompt");
  expect_one_line_error("eval -m '" + kModel + "' --text '" + kText + "' --recommend -1", "--recommend");
  expect_one_line_error("eval -m '" + kModel + "' --text '" + kText + "' --kv fp16 --ctx 128 --retrieval 100000",
                        "retrieval length 100000 exceeds");
}

TEST(CliObserve, GenerateWritesEveryLayerAndHead) {
  const std::string file = ::testing::TempDir() + "veloxquant_observe_" + std::to_string(::getpid()) + ".json";
  const auto r =
      run_cli("generate -m '" + kModel + "' -p 'Once upon a time' -n 8 --temp 0 -t 1 --observe '" + file + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(file));
  ASSERT_EQ(j.at("layers").size(), 5u);  // stories260K: 5 layers of 4 KV heads
  const auto& head = j.at("layers").at(0).at("heads").at(3);
  EXPECT_EQ(head.at("kv_head"), 3);
  // An fp16 cache: only half-precision rounding.
  EXPECT_LT(head.at("key_error").get<double>(), 1e-3);
  EXPECT_LT(head.at("attention_error").get<double>(), 1e-2);
  EXPECT_GT(head.at("sink_mass").get<double>(), 0.0);
  std::remove(file.c_str());
  // A restored session holds tokens the observer never saw: refused.
  const std::string session = file + ".vqs";
  ASSERT_EQ(run_cli("generate -m '" + kModel + "' -p 'Once upon a time' -n 0 --save-session '" + session + "'").code,
            0);
  expect_one_line_error("generate -m '" + kModel + "' --load-session '" + session + "' --observe '" + file + "'",
                        "--observe cannot follow a --load-session");
  std::remove(session.c_str());
}

}  // namespace
}  // namespace veloxquant
