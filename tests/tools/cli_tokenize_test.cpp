// `veloxquant tokenize` on a vocabulary-only GGUF (the committed llama-bpe fixture, no tensors):
// the ids are the library's, in each output form, with llama-tokenize's defaults (BOS added,
// special tokens parsed) and its two switches; bad input is one line and exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {
namespace {

using test::CliRun;
using test::count_lines;
using test::expect_one_line_error;
using test::run_cli;
using Ids = std::vector<int32_t>;

const std::string kVocab = std::string(VELOXQUANT_TEST_DATA_DIR) + "/tokenizer/bpe-llama-bpe.gguf";
const std::string kText = "Hello world<|im_start|>!";

std::string ids_list(const Ids& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]\n";
}

TEST(CliTokenize, IdsAreTheLibrarysWithLlamaTokenizeDefaults) {
  ASSERT_TRUE(GgufFile::open(kVocab).tensors().empty()) << "the fixture should hold no weights";
  const Tokenizer tok = Tokenizer::load(kVocab);
  const Ids ids = tok.encode(kText, /*add_special=*/true, /*parse_special=*/true);
  ASSERT_EQ(ids.front(), tok.bos());
  const std::string args = "tokenize -m '" + kVocab + "' -p '" + kText + "'";

  CliRun r = run_cli(args + " --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ids_list(ids));

  r = run_cli(args + " --no-bos --no-parse-special --ids --show-count");
  ASSERT_EQ(r.code, 0) << r.err;
  const Ids plain = tok.encode(kText, false, false);
  EXPECT_NE(plain, Ids(ids.begin() + 1, ids.end()));  // <|im_start|> became plain text
  EXPECT_EQ(r.out, ids_list(plain) + "Total number of tokens: " + std::to_string(plain.size()) +
                       "\n");

  // One line per token, "    id -> 'piece'", control tokens shown by their text.
  r = run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.out), ids.size());
  EXPECT_NE(r.out.find(std::to_string(ids[0]) + " -> '<|begin_of_text|>'\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" -> '<|im_start|>'\n"), std::string::npos) << r.out;

  r = run_cli(args + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("ids").get<Ids>(), ids);
  EXPECT_EQ(j.at("tokens").get<size_t>(), ids.size());
  ASSERT_EQ(j.at("pieces").size(), ids.size());
  EXPECT_EQ(j.at("pieces")[1].get<std::string>(), tok.token_to_piece(ids[1]));
}

TEST(CliTokenize, FileBytesAreTokenizedUnchanged) {
  const std::string path = ::testing::TempDir() + "veloxquant_tokenize_input.txt";
  const std::string text = "two\nlines \t\n";
  std::ofstream(path, std::ios::binary) << text;
  const CliRun r = run_cli("tokenize -m '" + kVocab + "' -f '" + path + "' --ids");
  std::filesystem::remove(path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, ids_list(Tokenizer::load(kVocab).encode(text, true, true)));
}

TEST(CliTokenize, BadInputIsOneLineAndExitCode2) {
  const std::string vocab = "tokenize -m '" + kVocab + "'";
  expect_one_line_error(vocab, "-p,--prompt");
  expect_one_line_error(vocab + " -p a -f b", "-p,--prompt");
  expect_one_line_error(vocab + " -f /nonexistent.txt", "/nonexistent.txt");
  expect_one_line_error("tokenize -m /nonexistent.gguf -p a", "/nonexistent.gguf");

  // An unsupported tokenizer is named, with the supported ones.
  GgufWriter w;
  w.add_metadata("tokenizer.ggml.model", GgufValue("bert"));
  w.add_metadata("tokenizer.ggml.tokens", GgufValue::array_of(std::vector<std::string>{"a"}));
  const std::string bert = ::testing::TempDir() + "veloxquant_tokenize_bert.gguf";
  w.write_file(bert);
  expect_one_line_error("tokenize -m '" + bert + "' -p a",
                        "unsupported tokenizer 'bert'; supported: llama (SentencePiece)");
  std::filesystem::remove(bert);
}

}  // namespace
}  // namespace veloxquant
