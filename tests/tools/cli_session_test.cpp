// generate --save-session / --load-session and the session subcommands, end to end, with their
// exact error lines.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "runtime/session_file_helpers.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

using test::expect_one_line_error;
using test::run_cli;

const std::string kModel = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";

std::string generate(const std::string& args) {
  return "generate -m '" + kModel + "' -n 24 --temp 0 -t 1 --json " + args;
}

nlohmann::json run_json(const std::string& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
}

TEST(CliSession, ALoadedSessionContinuesAsTheUninterruptedRun) {
  test::TempDir dir;
  const std::string file = dir.file("s.vqs");
  const auto whole = run_json(generate("--kv kivi:residual=8 -p 'Once upon a time, there was a little girl'"));
  const auto saved = run_json(generate("--kv kivi:residual=8 -p 'Once upon a time' --save-session '" + file + "'"));
  EXPECT_EQ(saved.at("session_tokens_reused"), 0);
  // The saved prompt continued with more text: only the new tokens are evaluated.
  const auto longer = run_json(generate("-p 'Once upon a time, there was a little girl' --load-session '" + file + "'"));
  EXPECT_EQ(longer.at("kv"), "kivi:kbits=2,vbits=2,group=32,residual=8");
  EXPECT_EQ(longer.at("session_tokens_reused"), 5);
  EXPECT_EQ(longer.at("prompt_tokens"), whole.at("prompt_tokens"));
  EXPECT_EQ(longer.at("text"), whole.at("text"));
  // No -p: generation continues right after the saved prompt, as the saving run did.
  const auto same = run_json(generate("--load-session '" + file + "'"));
  EXPECT_EQ(same.at("text"), saved.at("text"));
}

TEST(CliSession, SaveAndLoadPrintWhatTheyDid) {
  test::TempDir dir;
  const std::string file = dir.file("s.vqs");
  const auto save = run_cli("generate -m '" + kModel + "' -p 'Once upon a time' -n 4 --temp 0 -t 1 "
                            "--save-session '" + file + "'");
  ASSERT_EQ(save.code, 0) << save.err;
  EXPECT_NE(save.err.find("session:   5 tokens saved to " + file + " in "), std::string::npos) << save.err;
  const auto load = run_cli("generate -m '" + kModel + "' -n 4 --temp 0 -t 1 --load-session '" + file + "'");
  ASSERT_EQ(load.code, 0) << load.err;
  EXPECT_EQ(load.out.rfind("Once upon a time", 0), 0u) << load.out;
  EXPECT_NE(load.err.find("session:   5 tokens restored from " + file + " in "), std::string::npos) << load.err;
  EXPECT_NE(load.err.find("prompt:    0 tokens in "), std::string::npos) << load.err;
}

TEST(CliSession, LoadErrorsAreOneLineNamingTheFileAndWhatDiffers) {
  test::TempDir dir;
  const std::string file = dir.file("s.vqs");
  ASSERT_EQ(run_cli(generate("-p 'Once upon a time' --kv kivi --save-session '" + file + "'")).code, 0);
  expect_one_line_error(generate("--kv fp16 --load-session '" + file + "'"),
                        "veloxquant: error: session file '" + file + "': the session was saved with "
                        "another kv spec: expected 'fp16' (seed 0), found "
                        "'kivi:kbits=2,vbits=2,group=32,residual=128' (seed 0)\n");
  expect_one_line_error(generate("-p 'Twice upon a time' --load-session '" + file + "'"),
                        "veloxquant: error: the prompt does not continue session file '" + file +
                            "': its token 1 is 274 (' T') where the session has 403 (' Once'); "
                            "expected the prompt to start with the session's 5 tokens\n");
  expect_one_line_error(generate("-p 'Once upon' --load-session '" + file + "'"),
                        "veloxquant: error: the prompt has 3 tokens, fewer than the 5 of session file '" +
                            file + "'; expected it to start with all of them (an empty prompt, or none: no "
                            "-p, continues the session as saved)\n");
  expect_one_line_error(generate("--ctx 4 --load-session '" + file + "'"),
                        "veloxquant: error: session file '" + file + "': the session holds 5 tokens; "
                        "expected at most the context's 4\n");
  expect_one_line_error(generate("--load-session '" + dir.file("missing.vqs") + "'"),
                        "veloxquant: error: session file '" + dir.file("missing.vqs") + "': cannot open it");
  expect_one_line_error(generate("--load-session '" + kModel + "'"),
                        "veloxquant: error: session file '" + kModel + "': not a VeloxQuant session "
                        "file: its first 8 bytes are not the magic \"VQSESSN\\0\"\n");
}

TEST(CliSession, InfoPrintsTheHeaderAndEverySection) {
  test::TempDir dir;
  const std::string file = dir.file("s.vqs");
  ASSERT_EQ(run_cli(generate("-p 'Once upon a time' --kv polar --save-session '" + file + "'")).code, 0);
  const auto r = run_cli("session info '" + file + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& line :
       {"file:           " + file + " (", std::string(" bytes, format version 2)\n"),
        std::string("model:          llama, 5 layers, 8 heads, 4 KV heads x 8, embedding 64, "
                    "feed_forward 172, vocab 512, context 2048\n"),
        "kv spec:        " + parse_spec("polar").to_string() + " (codec seed 0)\n",
        std::string("artifacts:      none\n"), std::string("tokens:         5\n"),
        std::string("                         0           12  header\n"),
        std::string("                        12           77  MODL\n")}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  EXPECT_EQ(test::count_lines(r.out), 20u) << r.out;  // 9 lines, the header row, 10 sections
}

TEST(CliSession, TranscodeWritesAFileOfTheNewMethodThatGenerateLoads) {
  test::TempDir dir;
  const std::string in = dir.file("fp16.vqs"), out = dir.file("kivi.vqs");
  ASSERT_EQ(run_cli(generate("-p 'Once upon a time' --save-session '" + in + "'")).code, 0);
  const auto r = run_cli("session transcode '" + in + "' '" + out + "' --kv kivi:residual=2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, out + ": 5 tokens re-encoded as kivi:kbits=2,vbits=2,group=32,residual=2\n");
  const auto j = run_json(generate("--load-session '" + out + "'"));
  EXPECT_EQ(j.at("kv"), "kivi:kbits=2,vbits=2,group=32,residual=2");
  EXPECT_EQ(j.at("session_tokens_reused"), 5);
}

TEST(CliSession, TranscodeAndInfoErrorsAreOneLine) {
  test::TempDir dir;
  const std::string in = dir.file("s.vqs");
  ASSERT_EQ(run_cli(generate("-p 'Once upon a time' --save-session '" + in + "'")).code, 0);
  expect_one_line_error("session transcode '" + in + "' '" + dir.file("o.vqs") + "' --kv kivi:kbits=3",
                        "veloxquant: error: kivi: kbits=3 is not supported; expected 2, 4 or 8");
  EXPECT_FALSE(std::filesystem::exists(dir.file("o.vqs")));
  expect_one_line_error("session transcode '" + in + "' '" + dir.file("o.vqs") + "'",
                        "--kv is required");
  std::vector<uint8_t> bytes = test::file_bytes(in);
  bytes.resize(bytes.size() - 1);
  test::write_bytes(dir.file("cut.vqs"), bytes);
  expect_one_line_error("session info '" + dir.file("cut.vqs") + "'",
                        "veloxquant: error: session file '" + dir.file("cut.vqs") + "': the section of layer 4 (LAYR) at byte");
  expect_one_line_error("session", "A subcommand is required");
}

}  // namespace
}  // namespace veloxquant
