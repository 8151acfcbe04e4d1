// The runtime commands end to end: generate, perplexity and their errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"

namespace veloxquant {
namespace {

using test::expect_one_line_error;
using test::run_cli;

const std::string kModel = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";

TEST(CliRuntime, GenerateGreedyPrintsTheContinuationAndASummary) {
  const auto r = run_cli("generate -m '" + kModel + "' -p 'Once upon a time' -n 24 --temp 0 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  for (const char* field : {"prompt:", "generated: 24 tokens", "kv cache:  fp16:", "peak resident"})
    EXPECT_NE(r.err.find(field), std::string::npos) << field << "\n" << r.err;
}

TEST(CliRuntime, GenerateJsonWithACompressedCache) {
  const auto r = run_cli("generate -m '" + kModel +
                         "' -p 'Once upon a time' -n 40 --kv turboquant_mse:bits=4,vbits=4 --seed 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("seed").get<uint64_t>(), 3u);
  EXPECT_EQ(j.at("kv").get<std::string>(), "turboquant_mse:bits=4,vbits=4");
  EXPECT_GT(j.at("generated_tokens").get<size_t>(), 0u);
  EXPECT_LT(j.at("kv_bytes").get<size_t>(), j.at("kv_fp16_bytes").get<size_t>());
  // The same seed gives the same text.
  const auto again = run_cli("generate -m '" + kModel +
                             "' -p 'Once upon a time' -n 40 --kv turboquant_mse:bits=4,vbits=4 --seed 3 --json");
  EXPECT_EQ(nlohmann::json::parse(again.out).at("text"), j.at("text"));
}

TEST(CliRuntime, PerplexityJsonOnWikitext) {
  const auto r = run_cli("perplexity -m '" + kModel + "' -f '" VELOXQUANT_SHARED_DIR
                         "/corpus/wikitext-2-raw/wiki.test.raw' --ctx 128 --chunks 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("chunks").get<size_t>(), 2u);
  EXPECT_EQ(j.at("scored_tokens").get<size_t>(), 2u * 63);
  EXPECT_GT(j.at("perplexity").get<double>(), 1.0);
  EXPECT_NE(r.err.find("2/2 chunks"), std::string::npos) << r.err;
}

TEST(CliRuntime, RuntimeErrorsAreOneLine) {
  expect_one_line_error("generate -m /nonexistent.gguf -p hi", "/nonexistent.gguf");
  expect_one_line_error("generate -m '" + kModel + "' -p hi --kv kivi:kbits=3", "kbits=3");
  expect_one_line_error("generate -m '" + kModel + "' -p hi --temp -1", "temperature");
  expect_one_line_error("perplexity -m '" + kModel + "' -f /nonexistent.txt", "/nonexistent.txt");
  expect_one_line_error("perplexity -m '" + kModel + "' -f '" VELOXQUANT_SHARED_DIR
                        "/corpus/wikitext-2-raw/wiki.test.raw' --ctx 128 --kl-base /nonexistent.bin",
                        "/nonexistent.bin");
  expect_one_line_error("generate -p hi", "--model");
}

}  // namespace
}  // namespace veloxquant
