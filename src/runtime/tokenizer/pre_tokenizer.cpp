#include "runtime/tokenizer/pre_tokenizer.h"

#include <array>
#include <cstdint>

#include "runtime/tokenizer/unicode.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

namespace {

struct NamedConfig {
  std::string_view name;
  PreTokenizerConfig config;
};

// The tokenizer.ggml.pre names llama.cpp maps to these four expressions.
constexpr std::array<NamedConfig, 16> kNamedConfigs = {{
    {"default", {PreTokenizer::Default, false, false}},
    {"gpt-2", {PreTokenizer::Gpt2, false, false}},
    {"phi-2", {PreTokenizer::Gpt2, false, false}},
    {"mpt", {PreTokenizer::Gpt2, false, false}},
    {"olmo", {PreTokenizer::Gpt2, false, false}},
    {"llama3", {PreTokenizer::Llama3, true, true}},
    {"llama-v3", {PreTokenizer::Llama3, true, true}},
    {"llama-bpe", {PreTokenizer::Llama3, true, true}},
    {"falcon3", {PreTokenizer::Llama3, true, true}},
    {"pixtral", {PreTokenizer::Llama3, true, true}},
    {"dbrx", {PreTokenizer::Llama3, false, false}},
    {"smaug-bpe", {PreTokenizer::Llama3, false, false}},
    {"qwen2", {PreTokenizer::Qwen2, false, false}},
    {"deepseek-r1-qwen", {PreTokenizer::Qwen2, false, false}},
    {"stablelm2", {PreTokenizer::Qwen2, false, false}},
    {"", {PreTokenizer::Default, false, false}},
}};

using Codepoints = std::vector<uint32_t>;
// A split is a list of consecutive piece lengths, in code points, covering the text.
using Lengths = std::vector<size_t>;

constexpr uint32_t kOutside = 0xFFFFFFFF;

// One piece of the text being split further. Positions outside it read as kOutside with no
// flags, which is how the expressions' lookaheads see the end of a piece.
class Scanner {
 public:
  Scanner(const Codepoints& cps, size_t begin, size_t end, Lengths& out)
      : cps_(cps), end_(end), cut_(begin), out_(out) {}

  bool inside(size_t i) const { return i < end_; }
  uint32_t at(size_t i) const { return inside(i) ? cps_[i] : kOutside; }
  uint8_t flags(size_t i) const { return inside(i) ? unicode::codepoint_flags(cps_[i]) : 0; }
  bool letter(size_t i) const { return flags(i) & unicode::kLetter; }
  bool number(size_t i) const { return flags(i) & unicode::kNumber; }
  bool space(size_t i) const { return flags(i) & unicode::kWhitespace; }
  // [^\s\p{L}\p{N}]: any code point of the piece that is none of the three.
  bool other(size_t i) const {
    return inside(i) && !(flags(i) & (unicode::kLetter | unicode::kNumber | unicode::kWhitespace));
  }
  bool line_break(size_t i) const { return at(i) == '\r' || at(i) == '\n'; }

  // Ends the current word at `end` (no word if empty) and returns `end`.
  size_t cut(size_t end) {
    if (end > cut_) out_.push_back(end - cut_);
    cut_ = end;
    return end;
  }

  // 's 't 're 've 'm 'll 'd at `pos`, lower case only or either case: the end, or 0 if none.
  size_t contraction(size_t pos, bool any_case) const {
    if (at(pos) != '\'' || !inside(pos + 1)) return 0;
    const auto fold = [&](uint32_t c) { return any_case && c >= 'A' && c <= 'Z' ? c + 32 : c; };
    const uint32_t c1 = fold(at(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
    if (!inside(pos + 2)) return 0;
    const uint32_t c2 = fold(at(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
      return pos + 3;
    }
    return 0;
  }

  // The end of a whitespace run starting at `pos` that is not followed by the end of the piece
  // loses its last character to the next word: \s+(?!\S) then \s+.
  size_t whitespace_end(size_t pos) const {
    size_t end = pos;
    while (space(end)) ++end;
    return end - pos > 1 && inside(end) ? end - 1 : end;
  }

 private:
  const Codepoints& cps_;
  size_t end_;
  size_t cut_;
  Lengths& out_;
};

// Applies `split_piece(scanner, begin, end)` to every piece of `pieces`.
template <class SplitPiece>
Lengths refine(const Codepoints& cps, const Lengths& pieces, SplitPiece split_piece) {
  Lengths out;
  out.reserve(pieces.size());
  size_t begin = 0;
  for (size_t length : pieces) {
    Scanner s(cps, begin, begin + length, out);
    split_piece(s, begin, begin + length);
    begin += length;
  }
  return out;
}

void split_gpt2(Scanner& s, size_t begin, size_t end) {
  for (size_t pos = begin; pos < end;) {
    if (const size_t c = s.contraction(pos, /*any_case=*/false)) {
      pos = s.cut(c);
      continue;
    }
    // " ?X+" for X in \p{L}, \p{N} and [^\s\p{L}\p{N}]: the class is the next code point's
    // when this one is a space.
    const size_t first = s.at(pos) == ' ' ? pos + 1 : pos;
    bool (Scanner::*cls)(size_t) const = nullptr;
    if (s.letter(first)) cls = &Scanner::letter;
    else if (s.number(first)) cls = &Scanner::number;
    else if (s.other(first)) cls = &Scanner::other;
    if (cls != nullptr) {
      pos = first;
      while ((s.*cls)(pos)) ++pos;
      s.cut(pos);
      continue;
    }
    // Only whitespace is left: either the code point itself or a space before more of it.
    pos = s.cut(s.whitespace_end(pos));
  }
}

// Llama3 when max_digits is 3, Qwen2 when it is 1.
void split_llama3(Scanner& s, size_t begin, size_t end, size_t max_digits) {
  for (size_t pos = begin; pos < end;) {
    if (const size_t c = s.contraction(pos, /*any_case=*/true)) {
      pos = s.cut(c);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!s.line_break(pos) && !s.number(pos) && (s.letter(pos) || s.letter(pos + 1))) {
      ++pos;
      while (s.letter(pos)) ++pos;
      s.cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}, repeated while digits follow
    if (s.number(pos)) {
      size_t run = 0;
      while (s.number(pos) && run < max_digits) {
        ++pos;
        ++run;
      }
      s.cut(pos);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". A lone space at the end of the piece also lands here and
    // becomes a word of its own, as \s+ would make it.
    const bool lead_space = s.at(pos) == ' ';
    if (s.other(pos) || (lead_space && (s.other(pos + 1) || !s.inside(pos + 1)))) {
      pos += lead_space ? 1 : 0;
      while (s.other(pos)) ++pos;
      while (s.line_break(pos)) ++pos;
      s.cut(pos);
      continue;
    }
    // \s*[\r\n]+ takes the whitespace run up to its last line break; otherwise \s+(?!\S), \s+.
    size_t run_end = pos;
    size_t after_break = 0;
    while (s.space(run_end)) {
      if (s.line_break(run_end)) after_break = run_end + 1;
      ++run_end;
    }
    pos = s.cut(after_break > 0 ? after_break : s.whitespace_end(pos));
  }
}

// Isolates every maximal run of code points that satisfy `in_class`; the text between runs stays
// one piece.
template <class InClass>
void isolate_runs(Scanner& s, size_t begin, size_t end, InClass in_class) {
  for (size_t pos = begin; pos < end;) {
    if (!in_class(s, pos)) {
      ++pos;
      continue;
    }
    s.cut(pos);
    while (pos < end && in_class(s, pos)) ++pos;
    s.cut(pos);
  }
  s.cut(end);
}

// Isolates each non-overlapping group of three ASCII digits, scanning left to right.
void isolate_digit_triples(Scanner& s, size_t begin, size_t end) {
  const auto digit = [&](size_t i) { return s.at(i) >= '0' && s.at(i) <= '9'; };
  for (size_t pos = begin; pos < end;) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      s.cut(pos);
      pos = s.cut(pos + 3);
    } else {
      ++pos;
    }
  }
  s.cut(end);
}

// llama.cpp's default: [\p{P}\$\+<=>\^~\|]+, then GPT-2's expression, then \p{N}+, then
// [0-9][0-9][0-9], each splitting the pieces of the one before.
Lengths split_default(const Codepoints& cps) {
  Lengths pieces = {cps.size()};
  pieces = refine(cps, pieces, [](Scanner& s, size_t b, size_t e) {
    isolate_runs(s, b, e, [](const Scanner& sc, size_t i) {
      const uint32_t c = sc.at(i);
      return (sc.flags(i) & unicode::kPunctuation) || c == '$' || c == '+' || c == '<' ||
             c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
    });
  });
  pieces = refine(cps, pieces, split_gpt2);
  pieces = refine(cps, pieces, [](Scanner& s, size_t b, size_t e) {
    isolate_runs(s, b, e, [](const Scanner& sc, size_t i) { return sc.number(i); });
  });
  return refine(cps, pieces, isolate_digit_triples);
}

}  // namespace

PreTokenizerConfig pre_tokenizer_config(std::string_view name) {
  for (const NamedConfig& entry : kNamedConfigs) {
    if (entry.name == name) return entry.config;
  }
  std::string supported;
  for (const NamedConfig& entry : kNamedConfigs) {
    if (entry.name.empty()) continue;
    supported += supported.empty() ? "" : ", ";
    supported += entry.name;
  }
  throw FormatError("tokenizer.ggml.pre: unsupported pre-tokenizer '" + std::string(name) +
                    "'; supported: " + supported + " (or absent, meaning default)");
}

std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text) {
  const Codepoints cps = unicode::decode_utf8(text);
  if (cps.empty()) return {};
  const Lengths whole = {cps.size()};
  Lengths pieces;
  switch (pre) {
    case PreTokenizer::Default:
      pieces = split_default(cps);
      break;
    case PreTokenizer::Gpt2:
      pieces = refine(cps, whole, split_gpt2);
      break;
    case PreTokenizer::Llama3:
      pieces = refine(cps, whole, [](Scanner& s, size_t b, size_t e) { split_llama3(s, b, e, 3); });
      break;
    case PreTokenizer::Qwen2:
      pieces = refine(cps, whole, [](Scanner& s, size_t b, size_t e) { split_llama3(s, b, e, 1); });
      break;
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t begin = 0;
  for (size_t length : pieces) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + length; ++i) unicode::append_utf8(word, cps[i]);
    begin += length;
  }
  return words;
}

}  // namespace veloxquant
