// Tokenizer: llama.cpp's own tokenizations (recorded by tests/data/tokenizer/make_expected.py
// into JSON) of tricky strings for the real stories260K SentencePiece vocabulary, a variant of it,
// and tiny byte-level BPE vocabularies under four pre-tokenizers; hand-made vocabularies for the
// merge order; round trips; and the errors for bad metadata.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/rng.h"
#include "expect_error.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/unicode.h"
#include "tokenizer_test_text.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
using test::shown;

const fs::path kFixtures = fs::path(VELOXQUANT_TEST_DATA_DIR) / "tokenizer";
const std::string kStories = std::string(VELOXQUANT_SHARED_DIR) + "/models/stories260K.gguf";

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

// FNV-1a over the ids as little-endian int32, as make_expected.py digests long tokenizations.
std::string fnv1a64(const Ids& ids) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int k = 0; k < 4; ++k) h = (h ^ ((u >> (8 * k)) & 0xFF)) * 0x100000001B3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The shared corpus file's lines (split at '\n') and whole-file tokenization against the fixture,
// when the shared corpus is present.
void expect_corpus_matches(const Tokenizer& tok, const nlohmann::json& corpus) {
  const std::string path =
      std::string(VELOXQUANT_SHARED_DIR) + "/" + corpus["file"].get<std::string>();
  if (!fs::exists(path)) return;
  const std::string text = read_file(path);
  std::vector<std::string> lines(1);
  for (const char c : text) {
    if (c == '\n') lines.emplace_back();
    else lines.back() += c;
  }
  for (const auto& l : corpus["lines"]) {
    const size_t n = l["line"].get<size_t>();
    EXPECT_EQ(tok.encode(lines.at(n - 1), false), l["ids"].get<Ids>()) << path << ":" << n;
  }
  const Ids whole = tok.encode(text, false);
  EXPECT_EQ(whole.size(), corpus["whole_file"]["tokens"].get<size_t>()) << path;
  EXPECT_EQ(fnv1a64(whole), corpus["whole_file"]["fnv1a64"].get<std::string>()) << path;
}

nlohmann::json load_expected(const std::string& name) {
  std::ifstream in(kFixtures / ("expected-" + name + ".json"));
  EXPECT_TRUE(in) << "missing fixture expected-" << name << ".json in " << kFixtures;
  return nlohmann::json::parse(in);
}

// stories260K's tokenizer with add_space_prefix=false and add_eos_token=true, as
// make_expected.py writes it for llama.cpp.
GgufFile stories_variant(const GgufFile& stories) {
  GgufWriter w;
  w.add_metadata("general.architecture", GgufValue("llama"));
  w.add_metadata("tokenizer.ggml.model", GgufValue("llama"));
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type"}) {
    w.add_metadata(key, stories.at(key));
  }
  w.add_metadata("tokenizer.ggml.bos_token_id", GgufValue(uint32_t{1}));
  w.add_metadata("tokenizer.ggml.eos_token_id", GgufValue(uint32_t{2}));
  w.add_metadata("tokenizer.ggml.unknown_token_id", GgufValue(uint32_t{0}));
  w.add_metadata("tokenizer.ggml.add_space_prefix", GgufValue(false));
  w.add_metadata("tokenizer.ggml.add_eos_token", GgufValue(true));
  return GgufFile::parse(w.to_bytes());
}

// Compares one vocabulary with its fixture.
void expect_matches_llama_cpp(const Tokenizer& tok, const nlohmann::json& expected) {
  EXPECT_EQ(tok.vocab_size(), expected["vocab_size"].get<size_t>());
  EXPECT_EQ(tok.bos(), expected["bos"].get<int32_t>());
  EXPECT_EQ(tok.eos(), expected["eos"].get<int32_t>());

  const auto& pieces = expected["pieces"];
  const auto eog = expected["end_of_generation"].get<std::set<int32_t>>();
  for (int32_t id = 0; id < static_cast<int32_t>(tok.vocab_size()); ++id) {
    EXPECT_EQ(tok.token_to_piece(id), from_hex(pieces[id].get<std::string>()))
        << "token " << id << " \"" << shown(tok.token_text(id)) << "\"";
    EXPECT_EQ(tok.is_end_of_generation(id), eog.count(id) > 0) << "token " << id;
  }

  EXPECT_GE(expected["cases"].size(), 80u);
  for (const auto& c : expected["cases"]) {
    const std::string text = from_hex(c["hex"].get<std::string>());
    SCOPED_TRACE("text \"" + shown(text) + "\"");
    EXPECT_EQ(tok.encode(text, false, false), c["ids"].get<Ids>());
    const Ids with_special = tok.encode(text, true, false);
    EXPECT_EQ(with_special, c["ids_add_special"].get<Ids>());
    EXPECT_EQ(tok.encode(text, false, true), c["ids_parse_special"].get<Ids>());
    if (c.contains("detokenize_add_special")) {
      EXPECT_EQ(tok.decode(with_special), from_hex(c["detokenize_add_special"].get<std::string>()));
    }
  }
  if (expected.contains("corpus")) expect_corpus_matches(tok, expected["corpus"]);
}

TEST(TokenizerLlamaCpp, Stories260kSentencePiece) {
  if (!fs::exists(kStories)) GTEST_SKIP() << "model not present: " << kStories;
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(kStories));
  EXPECT_EQ(tok.kind(), TokenizerKind::SentencePiece);
  expect_matches_llama_cpp(tok, load_expected("stories260k"));
}

TEST(TokenizerLlamaCpp, Stories260kWithoutSpacePrefixWithEos) {
  if (!fs::exists(kStories)) GTEST_SKIP() << "model not present: " << kStories;
  const Tokenizer tok = Tokenizer::from_gguf(stories_variant(GgufFile::open(kStories)));
  expect_matches_llama_cpp(tok, load_expected("stories260k-variant"));
}

class TokenizerLlamaCppBpe : public testing::TestWithParam<std::string> {};

TEST_P(TokenizerLlamaCppBpe, MatchesFixture) {
  const std::string name = "bpe-" + GetParam();
  const Tokenizer tok =
      Tokenizer::from_gguf(GgufFile::open((kFixtures / (name + ".gguf")).string()));
  EXPECT_EQ(tok.kind(), TokenizerKind::BytePairEncoding);
  expect_matches_llama_cpp(tok, load_expected(name));
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerLlamaCppBpe,
                         testing::Values("llama-bpe", "qwen2", "gpt-2", "default"),
                         test::param_name);

// ---- round trips -------------------------------------------------------------------------------

std::string random_ascii(Rng& rng, size_t max_length) {
  const size_t n = rng.next_u64() % (max_length + 1);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    // Mostly letters and spaces, with digits, punctuation, tabs and newlines.
    static const std::string kAlphabet =
        "abcdefghijklmnopqrstuvwxyz      ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()\t\n";
    s += kAlphabet[rng.next_u64() % kAlphabet.size()];
  }
  return s;
}

std::string random_utf8(Rng& rng, size_t max_length) {
  const size_t n = rng.next_u64() % (max_length + 1);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = 0;
    switch (rng.next_u64() % 4) {
      case 0: cp = static_cast<uint32_t>(rng.next_u64() % 0x80); break;
      case 1: cp = static_cast<uint32_t>(0x80 + rng.next_u64() % (0x800 - 0x80)); break;
      case 2: cp = static_cast<uint32_t>(0x800 + rng.next_u64() % (0x10000 - 0x800)); break;
      default: cp = static_cast<uint32_t>(0x10000 + rng.next_u64() % (0x110000 - 0x10000)); break;
    }
    if (cp >= 0xD800 && cp < 0xE000) cp = ' ';  // surrogates are not valid UTF-8
    unicode::append_utf8(s, cp);
  }
  return s;
}

TEST(TokenizerRoundTrip, SentencePieceAsciiText) {
  if (!fs::exists(kStories)) GTEST_SKIP() << "model not present: " << kStories;
  const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(kStories));
  Rng rng(20240601);
  for (int i = 0; i < 300; ++i) {
    const std::string s = random_ascii(rng, 60);
    EXPECT_EQ(tok.decode(tok.encode(s, true)), s) << shown(s);
    EXPECT_EQ(tok.decode(tok.encode(s, false)), s) << shown(s);
  }
}

TEST(TokenizerRoundTrip, BytePairEncodingAnyUtf8) {
  for (const char* pre : {"llama-bpe", "qwen2", "gpt-2", "default"}) {
    const Tokenizer tok = Tokenizer::from_gguf(
        GgufFile::open((kFixtures / (std::string("bpe-") + pre + ".gguf")).string()));
    Rng rng(7);
    for (int i = 0; i < 200; ++i) {
      const std::string s = i % 2 ? random_utf8(rng, 40) : random_ascii(rng, 60);
      EXPECT_EQ(tok.decode(tok.encode(s, false)), s) << pre << ": " << shown(s);
      EXPECT_EQ(tok.decode(tok.encode(s, true, true)), s) << pre << ": " << shown(s);
    }
  }
}

// ---- hand-made vocabularies --------------------------------------------------------------------

struct VocabSpec {
  std::string model = "llama";
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  std::vector<std::pair<std::string, GgufValue>> extra;
};

GgufFile make_file(const VocabSpec& v) {
  GgufWriter w;
  w.add_metadata("general.architecture", GgufValue("llama"));
  w.add_metadata("tokenizer.ggml.model", GgufValue(v.model));
  if (!v.tokens.empty()) w.add_metadata("tokenizer.ggml.tokens", GgufValue::array_of(v.tokens));
  if (!v.scores.empty()) w.add_metadata("tokenizer.ggml.scores", GgufValue::array_of(v.scores));
  if (!v.types.empty()) w.add_metadata("tokenizer.ggml.token_type", GgufValue::array_of(v.types));
  if (!v.merges.empty()) w.add_metadata("tokenizer.ggml.merges", GgufValue::array_of(v.merges));
  for (const auto& [key, value] : v.extra) w.add_metadata(key, value);
  return GgufFile::parse(w.to_bytes());
}

// <unk> <s> </s>, then normal tokens with the given scores.
VocabSpec spm_spec(std::vector<std::pair<std::string, float>> normal) {
  VocabSpec v;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.scores = {0, 0, 0};
  v.types = {2, 3, 3};
  for (const auto& [text, score] : normal) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(1);
  }
  return v;
}

TEST(TokenizerSentencePiece, MergesHighestScoreFirstAndLeftmostOnTies) {
  // "▁abc": ▁a (score 5) merges before bc (1); then ▁ab (2) merges before bc, leaving c.
  const std::string sp = "\xE2\x96\x81";  // U+2581
  {
    const Tokenizer tok = Tokenizer::from_gguf(make_file(spm_spec(
        {{sp, 0}, {"a", 0}, {"b", 0}, {"c", 0}, {sp + "a", 5}, {"bc", 1}, {sp + "ab", 2}})));
    EXPECT_EQ(tok.encode("abc", false), (Ids{9, 6}));  // ▁ab c
  }
  // With ▁ab below bc, bc goes first and ▁ab can no longer form.
  {
    const Tokenizer tok = Tokenizer::from_gguf(make_file(spm_spec(
        {{sp, 0}, {"a", 0}, {"b", 0}, {"c", 0}, {sp + "a", 5}, {"bc", 1}, {sp + "ab", 0.5f}})));
    EXPECT_EQ(tok.encode("abc", false), (Ids{7, 8}));  // ▁a bc
  }
  // Equal scores: the leftmost pair merges first, "▁" "aa" "a".
  {
    const Tokenizer tok =
        Tokenizer::from_gguf(make_file(spm_spec({{sp, 0}, {"a", 0}, {"aa", 1}})));
    EXPECT_EQ(tok.encode("aaa", false), (Ids{3, 5, 4}));
  }
}

TEST(TokenizerSentencePiece, UnknownCharacterWithoutByteTokensIsUnk) {
  const Tokenizer tok = Tokenizer::from_gguf(make_file(spm_spec({{"\xE2\x96\x81" "x", 0}})));
  EXPECT_EQ(tok.encode("x\xC3\xA9", true), (Ids{1, 3, 0, 0}));  // BOS ▁x, then é's two bytes
  EXPECT_EQ(tok.token_to_piece(0), "");                       // unknown prints nothing
}

// Gemma 4: BPE over text whose spaces are U+2581, split only at newline runs, which are
// tokens of their own; <0xXX> byte fallback; BOS even though the file says not to add it.
TEST(TokenizerBytePairEncoding, Gemma4MergesSentencePieceText) {
  const std::string sp = "\xE2\x96\x81";  // U+2581
  VocabSpec v;
  v.model = "gemma4";
  v.tokens = {"<pad>", "<eos>", "<bos>", sp, "a", "b", sp + "a", sp + "ab", "\n", "\n\n", "<0x63>"};
  v.types = {3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6};
  v.merges = {sp + " a", sp + "a b"};
  v.extra.emplace_back("tokenizer.ggml.bos_token_id", GgufValue(uint32_t{2}));
  v.extra.emplace_back("tokenizer.ggml.eos_token_id", GgufValue(uint32_t{1}));
  v.extra.emplace_back("tokenizer.ggml.add_bos_token", GgufValue(false));
  const Tokenizer tok = Tokenizer::from_gguf(make_file(v));
  EXPECT_EQ(tok.kind(), TokenizerKind::BytePairEncoding);
  // "a▁ab" merges ▁ a, then ▁a b; "\n\n" is an entry; c only has its byte token; d has none.
  EXPECT_EQ(tok.encode("a ab\n\ncd", true), (Ids{2, 4, 7, 9, 10}));
  // A newline run without an entry of its own is merged like any word.
  EXPECT_EQ(tok.encode("\n\n\n", false), (Ids{8, 8, 8}));
  EXPECT_EQ(tok.token_to_piece(7), " ab");
  EXPECT_EQ(tok.token_to_piece(10), "c");
  EXPECT_EQ(tok.decode({2, 4, 7, 9, 10}), "a ab\n\nc");
  EXPECT_TRUE(tok.is_end_of_generation(1));
}

TEST(TokenizerBytePairEncoding, PreTokenizersSplitAsTheirExpressions) {
  using W = std::vector<std::string>;
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "Hello 1234567 world!!\n\n  x"),
            (W{"Hello", " ", "123", "456", "7", " world", "!!\n\n", " ", " x"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Qwen2, "ab 123"), (W{"ab", " ", "1", "2", "3"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "I'm  OK's 42"),
            (W{"I", "'m", " ", " OK", "'s", " 42"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "I'M"), (W{"I", "'M"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "I'M"), (W{"I", "'", "M"}));
  // \s+(?!\S): a run of spaces gives its last one to the next word, unless the text ends.
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "a   b   "), (W{"a", "  ", " b", "   "}));
  // Default isolates punctuation runs, then number runs, then ASCII digit triples.
  EXPECT_EQ(pre_tokenize(PreTokenizer::Default, "x+=12345;"), (W{"x", "+=", "123", "45", ";"}));
  // Falcon's first expression also isolates backticks, and it has no \p{N}+ step.
  EXPECT_EQ(pre_tokenize(PreTokenizer::Default, "a`b`+=1234"),
            (W{"a", "`", "b", "`", "+=", "123", "4"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Falcon, "a`b`+=1234"),
            (W{"a", "`", "b", "`+=", "123", "4"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::StarCoder, "abc 123"), (W{"abc", " ", "1", "2", "3"}));
  // Qwen35 keeps a combining mark (U+0301) with its letters; Qwen2 starts a new word at it.
  EXPECT_EQ(pre_tokenize(PreTokenizer::Qwen2, "e\xCC\x81x 12"),
            (W{"e", "\xCC\x81x", " ", "1", "2"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Qwen35, "e\xCC\x81x 12"), (W{"e\xCC\x81x", " ", "1", "2"}));
  const std::string world = "\xE4\xB8\x96\xE7\x95\x8C";  // 世界
  EXPECT_EQ(pre_tokenize(PreTokenizer::DeepSeekCoder, "Hi, " + world + "\n12"),
            (W{"Hi", ",", " ", world, "\n", "1", "2"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::DeepSeekLlm, "Hi,  " + world + "  "),
            (W{"Hi", ",", "  ", world, "  "}));
  // The ideographic space U+3000 lies inside DeepSeek's punctuation and CJK ranges, but llama.cpp
  // matches those on text whose non-ASCII whitespace became U+000B: it is only ever \s.
  const std::string stop = "\xE3\x80\x82", ideographic_space = "\xE3\x80\x80";
  EXPECT_EQ(pre_tokenize(PreTokenizer::DeepSeekLlm, stop + ideographic_space + stop),
            (W{stop, ideographic_space, stop}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Newlines, "a b\n\nc\n"), (W{"a b", "\n\n", "c", "\n"}));
}

TEST(TokenizerUnicode, ClassesAndByteAlphabet) {
  EXPECT_EQ(unicode::codepoint_flags('a'), unicode::kLetter);
  EXPECT_EQ(unicode::codepoint_flags(0x65E5), unicode::kLetter);       // 日
  EXPECT_EQ(unicode::codepoint_flags(0x2167), unicode::kNumber);       // Ⅷ
  EXPECT_EQ(unicode::codepoint_flags(0x3000), unicode::kWhitespace);   // ideographic space
  EXPECT_EQ(unicode::codepoint_flags(0x1C), 0);                        // not White_Space
  EXPECT_EQ(unicode::codepoint_flags(0x2026), unicode::kPunctuation);  // …
  EXPECT_EQ(unicode::codepoint_flags(0x1F600), 0);                     // 😀 is a symbol
  EXPECT_EQ(unicode::codepoint_flags(0x0301), unicode::kMark);         // combining acute
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = unicode::byte_to_codepoint(static_cast<uint8_t>(b));
    EXPECT_EQ(unicode::codepoint_to_byte(cp), b);
    seen.insert(cp);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(unicode::byte_to_codepoint(' '), 0x120u);  // Ġ
  EXPECT_EQ(unicode::codepoint_to_byte(0x3000), -1);
  EXPECT_EQ(unicode::decode_utf8("a\xC3(\xF0\x9F\x98\x80"),
            (std::vector<uint32_t>{'a', 0xFFFD, '(', 0x1F600}));
}

// ---- errors ------------------------------------------------------------------------------------

std::string load_error(const VocabSpec& v) {
  return test::error_message<FormatError>([&] { Tokenizer::from_gguf(make_file(v)); });
}

#define EXPECT_LOAD_ERROR(spec, fragment) EXPECT_CONTAINS(load_error(spec), fragment)

TEST(TokenizerErrors, BadMetadataNamesTheKey) {
  const VocabSpec good = spm_spec({{"a", 0}});
  ASSERT_EQ(load_error(good), "");

  VocabSpec v = good;
  v.tokens.clear();
  v.scores.clear();
  v.types.clear();
  EXPECT_LOAD_ERROR(v, "tokenizer.ggml.tokens");

  v = good;
  v.scores.pop_back();
  EXPECT_LOAD_ERROR(v, "'tokenizer.ggml.scores': expected 4 entries");

  v = good;
  v.types.push_back(1);
  EXPECT_LOAD_ERROR(v, "'tokenizer.ggml.token_type': expected 4 entries");

  v = good;
  v.types[3] = 9;
  EXPECT_LOAD_ERROR(v, "token 3 has type 9");

  v = good;
  v.tokens[3] = "<s>";
  EXPECT_LOAD_ERROR(v, "tokens 1 and 3 have the same text");

  v = good;
  v.model = "bert";
  EXPECT_LOAD_ERROR(v, "unsupported tokenizer 'bert'; supported: llama (SentencePiece), gpt2");

  v = good;
  v.extra.emplace_back("tokenizer.ggml.bos_token_id", GgufValue(uint32_t{4}));
  EXPECT_LOAD_ERROR(v, "'tokenizer.ggml.bos_token_id': token id 4 is out of range; expected 0..3");

  v = good;
  v.extra.emplace_back("tokenizer.ggml.eos_token_id", GgufValue("2"));
  EXPECT_LOAD_ERROR(v, "'tokenizer.ggml.eos_token_id': expected an integer");

  v = good;
  v.extra.emplace_back("tokenizer.ggml.add_bos_token", GgufValue(uint8_t{1}));
  EXPECT_LOAD_ERROR(v, "tokenizer.ggml.add_bos_token");

  v = good;
  v.tokens.push_back("<0xZZ>");
  v.scores.push_back(0);
  v.types.push_back(6);
  EXPECT_LOAD_ERROR(v, "\"<0xZZ>\" has type byte");

  v = good;
  v.model = "gpt2";
  EXPECT_LOAD_ERROR(v, "tokenizer.ggml.merges");

  v.merges = {"ab"};
  EXPECT_LOAD_ERROR(v, "entry 0 \"ab\" is not two tokens separated by a space");

  v.merges = {"a b"};
  v.extra.emplace_back("tokenizer.ggml.pre", GgufValue("klingon"));
  EXPECT_LOAD_ERROR(v, "unsupported pre-tokenizer 'klingon'; supported: default, gpt-2");

  GgufWriter w;
  w.add_metadata("tokenizer.ggml.tokens", GgufValue::array_of(good.tokens));
  try {
    Tokenizer::from_gguf(GgufFile::parse(w.to_bytes()));
    ADD_FAILURE() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, NoneIdsAndOutOfRangeIds) {
  VocabSpec v = spm_spec({{"\xE2\x96\x81" "a", 0}});
  v.extra.emplace_back("tokenizer.ggml.eot_token_id", GgufValue(uint32_t{0xFFFFFFFF}));
  v.extra.emplace_back("tokenizer.ggml.padding_token_id", GgufValue(uint32_t{4}));  // unused
  v.extra.emplace_back("tokenizer.ggml.bos_token_id", GgufValue(int32_t{-1}));
  const Tokenizer tok = Tokenizer::from_gguf(make_file(v));
  EXPECT_EQ(tok.bos(), -1);
  EXPECT_EQ(tok.encode("a", true), (Ids{3}));  // no BOS to add
  EXPECT_THROW(tok.token_to_piece(4), Error);
  EXPECT_THROW(tok.token_to_piece(-1), Error);
  EXPECT_THROW(tok.token_text(4), Error);
  EXPECT_THROW(tok.decode({3, 99}), Error);
  EXPECT_FALSE(tok.is_end_of_generation(99));
  EXPECT_TRUE(tok.is_end_of_generation(2));
}

}  // namespace
}  // namespace veloxquant
