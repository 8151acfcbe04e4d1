#include "fixture_vocab.h"

#include <fmt/format.h>

namespace veloxquant::dev {
namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's marker for a space.
constexpr const char* kSpm = "\xE2\x96\x81";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode in its token order: the printable bytes map to themselves, the other
// 68 to U+0100 onward. GPT-2 and Qwen2 vocabularies start with these 256 tokens in this order.
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> out;
  std::vector<bool> printable(256, false);
  for (uint32_t b = 0; b < 256; ++b)
    printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  for (uint32_t b = 0; b < 256; ++b)
    if (printable[b]) out.push_back(utf8(b));
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b)
    if (!printable[b]) out.push_back(utf8(next++));
  return out;
}

std::string spm(std::string_view piece) {
  std::string s;
  for (char c : piece) s += c == ' ' ? std::string(kSpm) : std::string(1, c);
  return s;
}

}  // namespace

FixtureVocab sentencepiece_vocab() {
  FixtureVocab v;
  v.model = "llama";
  auto add = [&](std::string text, float score, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0.0f, kUnknown);
  add("<s>", 0.0f, kControl);
  add("</s>", 0.0f, kControl);
  v.unk = 0, v.bos = 1, v.eos = 2;
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0.0f, kByte);
  // Merged pieces first (higher scores merge first), then the single characters they are built
  // from, so that every piece is reachable by SentencePiece's pairwise merges.
  const char* pieces[] = {" t", "he", " a", "in", " the", "er", "on", " s", "re", "at", "nd",
                          " w", "ed", " and", "ou", "en", " h", "it", " b", "is", " ", "e",
                          "t", "a", "o", "n", "i", "h", "s", "r", "d", "l", "u", "w", "b",
                          "c", "f", "g", "m", "y", "p", ",", "."};
  float score = -1.0f;
  for (const char* p : pieces) add(spm(p), score--, kNormal);
  return v;
}

FixtureVocab byte_bpe_vocab() {
  FixtureVocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.add_bos = false;  // Qwen2 models prepend nothing
  for (std::string& t : byte_alphabet()) {
    v.tokens.push_back(std::move(t));
    v.types.push_back(kNormal);
  }
  // "Ġ" is the byte alphabet's space. Each merge's result is a token of its own.
  const std::string G = utf8(0x120);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {G, "t"}, {G, "a"}, {"h", "e"}, {"i", "n"}, {"r", "e"}, {"o", "n"}, {G + "t", "he"},
      {"e", "r"}, {G, "s"}, {"a", "t"}, {G, "w"}, {G, "o"}, {"e", "n"}, {G, "c"}, {"i", "t"},
      {"i", "s"}, {"a", "n"}, {"o", "r"}, {"e", "s"}, {G, "b"}};
  for (const auto& [left, right] : merges) {
    v.merges.push_back(left + " " + right);
    v.tokens.push_back(left + right);
    v.types.push_back(kNormal);
  }
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(special);
    v.types.push_back(kControl);
  }
  const auto n = static_cast<int32_t>(v.tokens.size());
  v.bos = n - 3;  // <|endoftext|>, as in Qwen2's GGUF files
  v.eos = n - 1;  // <|im_end|>
  return v;
}

std::vector<std::pair<std::string, GgufValue>> vocab_metadata(const FixtureVocab& v) {
  std::vector<std::pair<std::string, GgufValue>> m;
  m.emplace_back("tokenizer.ggml.model", GgufValue(v.model));
  if (!v.pre.empty()) m.emplace_back("tokenizer.ggml.pre", GgufValue(v.pre));
  m.emplace_back("tokenizer.ggml.tokens", GgufValue::array_of(v.tokens));
  if (!v.scores.empty()) m.emplace_back("tokenizer.ggml.scores", GgufValue::array_of(v.scores));
  m.emplace_back("tokenizer.ggml.token_type", GgufValue::array_of(v.types));
  if (!v.merges.empty()) m.emplace_back("tokenizer.ggml.merges", GgufValue::array_of(v.merges));
  m.emplace_back("tokenizer.ggml.bos_token_id", GgufValue(static_cast<uint32_t>(v.bos)));
  m.emplace_back("tokenizer.ggml.eos_token_id", GgufValue(static_cast<uint32_t>(v.eos)));
  if (v.unk >= 0)
    m.emplace_back("tokenizer.ggml.unknown_token_id", GgufValue(static_cast<uint32_t>(v.unk)));
  m.emplace_back("tokenizer.ggml.add_bos_token", GgufValue(v.add_bos));
  return m;
}

}  // namespace veloxquant::dev
