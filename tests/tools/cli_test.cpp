// Runs the built `veloxquant` CLI (path injected at compile time) and checks exit codes, output
// and the one-line-on-stderr error convention.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli_runner.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

using test::CliRun;
using test::count_lines;
using test::expect_one_line_error;
using test::run_cli;

TEST(Cli, MethodsListsEveryRegisteredMethod) {
  const CliRun r = run_cli("methods");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_FALSE(registered_methods().empty());
  for (const auto& m : registered_methods()) {
    // Each method's entry starts a line with its name.
    const bool at_start = r.out.rfind(m.name + " ", 0) == 0;
    EXPECT_TRUE(at_start || r.out.find("\n" + m.name + " ") != std::string::npos)
        << m.name << " missing from:\n" << r.out;
  }
}

TEST(Cli, BenchFp16Json) {
  const CliRun r = run_cli("bench --kv fp16 --tokens 64 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  ASSERT_TRUE(j.is_object()) << r.out;
  const std::set<std::string> expected = {
      "method", "spec", "fp16_bytes", "k_bytes", "v_bytes", "compression_ratio", "key_mse",
      "key_cosine", "value_mse", "attn_rel_err", "encode_tokens_per_s", "attend_tokens_per_s"};
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(j.at("method"), "fp16");
  EXPECT_EQ(j.at("spec"), "fp16");
  EXPECT_EQ(j.at("compression_ratio").get<double>(), 1.0);
  const size_t fp16 = j.at("fp16_bytes").get<size_t>();
  EXPECT_EQ(j.at("k_bytes").get<size_t>() + j.at("v_bytes").get<size_t>(), fp16);
  // Default workload: 4 KV heads, head_dim 128, K and V in fp16.
  EXPECT_EQ(fp16, 2u * 2u * 64u * 4u * 128u);
  EXPECT_GT(j.at("key_cosine").get<double>(), 0.9999);
  // fp16 storage: tiny but nonnegative reconstruction error (the scale depends on the workload).
  EXPECT_GE(j.at("key_mse").get<double>(), 0.0);
  EXPECT_GE(j.at("value_mse").get<double>(), 0.0);
  EXPECT_LT(j.at("attn_rel_err").get<double>(), 2e-3);
  EXPECT_GT(j.at("encode_tokens_per_s").get<double>(), 0.0);
  EXPECT_GT(j.at("attend_tokens_per_s").get<double>(), 0.0);
}


TEST(Cli, BadSpecExitsTwoWithOneLine) {
  expect_one_line_error("bench --kv nope --tokens 64", "nope");
  expect_one_line_error("bench --kv fp16:x=1 --tokens 64", "'x'");
  expect_one_line_error("bench --kv 'fp16:x' --tokens 64", "x");
}

TEST(Cli, BadOptionExitsTwoWithOneLine) {
  expect_one_line_error("bench --kv fp16 --tokens 0", "--tokens");
  expect_one_line_error("bench --kv fp16 --tokens abc", "--tokens");
  expect_one_line_error("bench --kv fp16 --no-such-flag", "no-such-flag");
  expect_one_line_error("nosuchcommand", "subcommand");
}

TEST(Cli, HelpExitsZero) {
  const CliRun top = run_cli("--help");
  EXPECT_EQ(top.code, 0) << top.err;
  EXPECT_NE(top.out.find("bench"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("methods"), std::string::npos) << top.out;
  const CliRun sub = run_cli("bench --help");
  EXPECT_EQ(sub.code, 0) << sub.err;
  EXPECT_NE(sub.out.find("--kv"), std::string::npos) << sub.out;
}

TEST(Cli, VersionPrintsTheProjectVersionAndExitsZero) {
  const CliRun r = run_cli("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "veloxquant " VELOXQUANT_VERSION "\n");
  EXPECT_EQ(r.err, "");
}

}  // namespace
}  // namespace veloxquant
