// llama.cpp's own tokenizer suite (its tests/test-tokenizer-0 over models/ggml-vocab-*.gguf): real
// vocabularies, each with test strings (.gguf.inp) and the ids Hugging Face's tokenizers give
// them (.gguf.out). The files come from the llama-cpp-python sdist, which vendors llama.cpp;
// scripts/setup.sh extracts them into .cache/llama-vocab. A missing file fails, never skips: CI
// runs this suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_test_text.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using test::shown;

const fs::path kDir = VELOXQUANT_LLAMA_VOCAB_DIR;

// Every vocabulary the pinned sdist ships: those with strings, those without (which must load
// and tokenize the others' strings losslessly), and the two BERT-style encoders (bert-bge:
// WordPiece, nomic-bert-moe: Unigram), embedding models' tokenizers, which this runtime skips.
const std::vector<std::string> kWithStrings = {
    "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe",
    "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"};
const std::vector<std::string> kWithoutStrings = {"aquila", "baichuan", "gpt-neox"};
const std::vector<std::string> kEncoders = {"bert-bge", "nomic-bert-moe"};

const std::string kMissing =
    " is missing; scripts/setup.sh extracts llama.cpp's vocabularies there";

fs::path vocab_path(const std::string& name) { return kDir / ("ggml-vocab-" + name + ".gguf"); }

// The file's bytes; a missing file throws, which fails the test with what to run.
std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + kMissing);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Tokenizer load_vocab(const std::string& name) {
  const fs::path path = vocab_path(name);
  if (!fs::exists(path)) throw std::runtime_error(path.string() + kMissing);
  return Tokenizer::load(path.string());
}

struct Case {
  std::string text;
  Ids ids;
};

// The strings and ids as test-tokenizer-0 reads them: strings separated by
// "\n__ggml_vocab_test__\n" (a separator at the very end opens no further string), one line of
// space-separated ids per string, stripped of surrounding whitespace.
std::vector<Case> read_cases(const std::string& name) {
  const std::string inp = read_file(vocab_path(name).string() + ".inp");
  const std::string out = read_file(vocab_path(name).string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    texts.push_back(inp.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + sep.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    Case& c = cases.emplace_back();
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  EXPECT_EQ(texts.size(), cases.size()) << name << ": strings in .inp against lines in .out";
  cases.resize(std::min(cases.size(), texts.size()));
  for (size_t i = 0; i < cases.size(); ++i) cases[i].text = std::move(texts[i]);
  return cases;
}

// "1 2 3", as the .out files write ids.
std::string ids_string(const Ids& ids) {
  std::string out;
  for (const int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

class TokenizerLlamaVocabSuite : public testing::TestWithParam<std::string> {};

// test-tokenizer-0's call: no BOS or EOS added, special tokens' text not parsed.
TEST_P(TokenizerLlamaVocabSuite, EveryStringGivesItsIds) {
  const std::string& name = GetParam();
  const Tokenizer tok = load_vocab(name);
  const std::vector<Case> cases = read_cases(name);
  ASSERT_FALSE(cases.empty()) << name << ": no strings";
  size_t passed = 0;
  for (const Case& c : cases) {
    const Ids got = tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids_string(got), ids_string(c.ids)) << name << ": \"" << shown(c.text) << "\"";
    passed += got == c.ids;
  }
  std::printf("%s: %zu/%zu strings\n", name.c_str(), passed, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerLlamaVocabSuite, testing::ValuesIn(kWithStrings),
                         test::param_name);

class TokenizerLlamaVocabWithoutStrings : public testing::TestWithParam<std::string> {};

// Byte fallback (SentencePiece) and the byte alphabet (BPE) cover every byte, so the suite's
// strings, valid UTF-8, must come back unchanged.
TEST_P(TokenizerLlamaVocabWithoutStrings, TokenizesLosslessly) {
  const std::string& name = GetParam();
  const Tokenizer tok = load_vocab(name);
  const std::vector<Case> cases = read_cases("llama-spm");
  ASSERT_FALSE(cases.empty());
  for (const Case& c : cases) {
    const Ids ids = tok.encode(c.text, /*add_special=*/false);
    EXPECT_EQ(shown(tok.decode(ids)), shown(c.text)) << name << ": ids " << ids_string(ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerLlamaVocabWithoutStrings,
                         testing::ValuesIn(kWithoutStrings), test::param_name);

// A newer sdist that brings a vocabulary this suite does not know fails here until it is listed.
TEST(TokenizerLlamaVocabSuiteFiles, ExactlyTheListedVocabularies) {
  ASSERT_TRUE(fs::is_directory(kDir)) << kDir.string() << kMissing;
  std::set<std::string> expected;
  for (const auto* list : {&kWithStrings, &kWithoutStrings, &kEncoders}) {
    for (const std::string& name : *list) expected.insert("ggml-vocab-" + name + ".gguf");
  }
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".gguf") found.insert(file);
  }
  EXPECT_EQ(found, expected);
}

}  // namespace
}  // namespace veloxquant
