// `veloxquant calibrate` end to end: an artifact made from a text file that generate then loads,
// and the one-line errors for what cannot be calibrated or loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.h"

namespace veloxquant {
namespace {

using test::expect_one_line_error;
using test::run_cli;

const std::string kModel = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";

struct Dir {
  std::string path = ::testing::TempDir() + "veloxquant_cli_calibrate_" + std::to_string(::getpid());
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() { std::filesystem::remove_all(path); }
};

TEST(CliCalibrate, MakesAnArtifactThatGenerateLoads) {
  const Dir dir;
  const std::string text = dir.path + "/calibration.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 20; ++i) f << "The little dog ran to the big tree and sat in the shade all day. ";
  }
  const auto r = run_cli("calibrate -m '" + kModel + "' -f '" + text + "' --kv kvquant_nuq:bits=4 -c 64 -o '" +
                         dir.path + "/out'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("calibrated kvquant_nuq:bits=4,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(5 layers x 4 KV heads x 8)"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir.path + "/out/kvquant_nuq.vqcal"));
  const auto g = run_cli("generate -m '" + kModel + "' -p 'Once upon a time' -n 8 --temp 0 -t 1 --kv kvquant_nuq:bits=4,artifacts='" +
                         dir.path + "/out'");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.err.find("kv cache:  kvquant_nuq:bits=4,"), std::string::npos) << g.err;
  // Loaded with another spec than it was fitted for: refused, naming both.
  expect_one_line_error("generate -m '" + kModel + "' -p 'Once' -n 1 --kv kvquant_nuq:bits=3,artifacts='" +
                            dir.path + "/out'",
                        "was fitted for 'kvquant_nuq:bits=4,");
}

TEST(CliCalibrate, ErrorsAreOneLine) {
  const std::string text = VELOXQUANT_SHARED_DIR "/corpus/wikitext-2-raw/wiki.test.raw";
  expect_one_line_error("calibrate -m '" + kModel + "' -f '" + text + "' --kv kivi -o x", "kivi has nothing to calibrate");
  expect_one_line_error("calibrate -m '" + kModel + "' -f '" + text + "' --kv kvquant_nuq:artifacts=y -o x",
                        "expected a spec without artifacts=");
  expect_one_line_error("generate -m '" + kModel + "' -p 'Once' -n 1 --kv kvquant_nuq", "needs calibration");
}

}  // namespace
}  // namespace veloxquant
