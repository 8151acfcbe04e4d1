#include "runtime/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <span>

#include "runtime/tokenizer/unicode.h"
#include "veloxquant/gguf.h"

namespace veloxquant {

namespace {

struct NamedConfig {
  std::string_view name;
  PreTokenizerConfig config;
};

constexpr PreTokenizerConfig plain(PreTokenizer kind) { return {.kind = kind}; }
constexpr PreTokenizerConfig kLlama3 = {.kind = PreTokenizer::Llama3,
                                        .whole_words = WholeWords::Always,
                                        .add_bos = AddBos::DefaultYes};
constexpr PreTokenizerConfig kGemma4 = {.kind = PreTokenizer::Newlines,
                                        .whole_words = WholeWords::NewlineRuns,
                                        .add_bos = AddBos::Always,
                                        .sentencepiece_style = true};

// The tokenizer.ggml.pre names llama.cpp maps to these expressions, grouped as it groups them.
constexpr NamedConfig kNamedConfigs[] = {
    {"default", plain(PreTokenizer::Default)},
    {"", plain(PreTokenizer::Default)},
    {"gpt-2", plain(PreTokenizer::Gpt2)},
    {"phi-2", plain(PreTokenizer::Gpt2)},
    {"mpt", plain(PreTokenizer::Gpt2)},
    {"olmo", plain(PreTokenizer::Gpt2)},
    {"falcon", plain(PreTokenizer::Falcon)},
    {"starcoder", plain(PreTokenizer::StarCoder)},
    {"refact", plain(PreTokenizer::StarCoder)},
    {"command-r", plain(PreTokenizer::StarCoder)},
    {"smollm", plain(PreTokenizer::StarCoder)},
    {"codeshell", plain(PreTokenizer::StarCoder)},
    {"exaone", plain(PreTokenizer::StarCoder)},
    {"minerva-7b", plain(PreTokenizer::StarCoder)},
    {"mellum2", plain(PreTokenizer::StarCoder)},
    {"llama3", kLlama3},
    {"llama-v3", kLlama3},
    {"llama-bpe", kLlama3},
    {"falcon3", kLlama3},
    {"pixtral", kLlama3},
    {"dbrx", plain(PreTokenizer::Llama3)},
    {"smaug-bpe", plain(PreTokenizer::Llama3)},
    {"qwen2", plain(PreTokenizer::Qwen2)},
    {"deepseek-r1-qwen", plain(PreTokenizer::Qwen2)},
    {"stablelm2", plain(PreTokenizer::Qwen2)},
    {"qwen35", plain(PreTokenizer::Qwen35)},
    {"deepseek-coder", plain(PreTokenizer::DeepSeekCoder)},
    {"deepseek-llm", plain(PreTokenizer::DeepSeekLlm)},
    // Also what tokenizer.ggml.model "gemma4" implies, whatever its pre says.
    {"gemma4", kGemma4},
};

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
  bool punctuation(size_t i) const { return flags(i) & unicode::kPunctuation; }
  bool mark(size_t i) const { return flags(i) & unicode::kMark; }
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

// A code point class of an expression, and one expression splitting one piece.
using Class = bool (*)(const Scanner&, size_t);
using Step = void (*)(Scanner&, size_t begin, size_t end);

bool letter(const Scanner& s, size_t i) { return s.letter(i); }
bool number(const Scanner& s, size_t i) { return s.number(i); }
bool punctuation(const Scanner& s, size_t i) { return s.punctuation(i); }
bool line_break(const Scanner& s, size_t i) { return s.line_break(i); }
bool newline(const Scanner& s, size_t i) { return s.at(i) == '\n'; }
bool ascii_digit(const Scanner& s, size_t i) { return s.at(i) >= '0' && s.at(i) <= '9'; }
// [^\s\p{L}\p{N}]: any code point of the piece that is none of the three.
bool other(const Scanner& s, size_t i) {
  return s.inside(i) && !s.letter(i) && !s.number(i) && !s.space(i);
}

// [\p{P}\$\+<=>\^~\|], and Falcon's, which adds the backtick.
bool default_symbol(const Scanner& s, size_t i) {
  const uint32_t c = s.at(i);
  return s.punctuation(i) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
         c == '^' || c == '~' || c == '|';
}
bool falcon_symbol(const Scanner& s, size_t i) { return default_symbol(s, i) || s.at(i) == '`'; }

// The classes DeepSeek's expressions spell out as code point ranges (sorted, inclusive).
struct Range {
  uint32_t first;
  uint32_t last;
};
// Cased letters: A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚ
// Ḁ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤ
// Ⳬ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃
constexpr Range kCasedLetters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};
// !-/:-~‘-‟　-。！-／：-～ (ASCII punctuation and letters but no digits, quotes, full-width forms)
constexpr Range kDeepSeekPunctuation[] = {{0x0021, 0x002F}, {0x003A, 0x007E}, {0x2018, 0x201F},
                                          {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}};
// 一-龥ࠀ-一가-퟿: from Samaritan to the CJK ideographs, and Hangul.
constexpr Range kDeepSeekCjk[] = {{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}};

// llama.cpp matches these classes with std::wregex on text whose non-ASCII whitespace it first
// replaces by U+000B, so whitespace inside a range (U+3000, U+2000..U+200A) never matches.
bool in_ranges(const Scanner& s, size_t i, std::span<const Range> ranges) {
  if (s.space(i)) return false;
  const uint32_t c = s.at(i);
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                                   [](uint32_t v, const Range& r) { return v < r.first; });
  return it != ranges.begin() && c <= (it - 1)->last;
}
bool cased_letter(const Scanner& s, size_t i) { return in_ranges(s, i, kCasedLetters); }
bool deepseek_punctuation(const Scanner& s, size_t i) {
  return in_ranges(s, i, kDeepSeekPunctuation);
}
bool deepseek_cjk(const Scanner& s, size_t i) { return in_ranges(s, i, kDeepSeekCjk); }

// Where a match of X+, X, \s?X+ or [0-9]{3} that starts at `pos` ends; `pos` if none does.
template <Class X>
size_t run(const Scanner& s, size_t pos) {
  while (X(s, pos)) ++pos;
  return pos;
}
template <Class X>
size_t one(const Scanner& s, size_t pos) {
  return X(s, pos) ? pos + 1 : pos;
}
template <Class X>
size_t spaced_run(const Scanner& s, size_t pos) {
  // No class X holds whitespace, so the space is taken exactly when X follows it.
  return run<X>(s, s.space(pos) && X(s, pos + 1) ? pos + 1 : pos);
}
size_t digit_triple(const Scanner& s, size_t pos) {
  return ascii_digit(s, pos) && ascii_digit(s, pos + 1) && ascii_digit(s, pos + 2) ? pos + 3 : pos;
}

// Isolates every match as std::regex_iterator finds them, leftmost first, each search starting
// where the last match ended; the text between matches stays one piece.
template <size_t (*Match)(const Scanner&, size_t)>
void isolate(Scanner& s, size_t begin, size_t end) {
  for (size_t pos = begin; pos < end;) {
    const size_t match_end = Match(s, pos);
    if (match_end == pos) {
      ++pos;
      continue;
    }
    s.cut(pos);
    pos = s.cut(match_end);
  }
  s.cut(end);
}

// \s+$: the piece's trailing whitespace, if any, becomes a word.
void isolate_trailing_whitespace(Scanner& s, size_t begin, size_t end) {
  size_t start = end;
  while (start > begin && s.space(start - 1)) --start;
  s.cut(start);
  s.cut(end);
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
    Class cls = nullptr;
    if (letter(s, first)) cls = letter;
    else if (number(s, first)) cls = number;
    else if (other(s, first)) cls = other;
    if (cls != nullptr) {
      pos = first;
      while (cls(s, pos)) ++pos;
      s.cut(pos);
      continue;
    }
    // Only whitespace is left: either the code point itself or a space before more of it.
    pos = s.cut(s.whitespace_end(pos));
  }
}

// Llama3 (digit runs of up to 3), Qwen2 (single digits) and Qwen35 (single digits, combining
// marks count as letters).
template <size_t kMaxDigits, bool kMarksAreLetters>
void split_llama3(Scanner& s, size_t begin, size_t end) {
  const auto word = [&](size_t i) { return s.letter(i) || (kMarksAreLetters && s.mark(i)); };
  const auto symbol = [&](size_t i) {
    return s.inside(i) && !word(i) && !s.number(i) && !s.space(i);
  };
  for (size_t pos = begin; pos < end;) {
    if (const size_t c = s.contraction(pos, /*any_case=*/true)) {
      pos = s.cut(c);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!s.line_break(pos) && !s.number(pos) && (word(pos) || word(pos + 1))) {
      ++pos;
      while (word(pos)) ++pos;
      s.cut(pos);
      continue;
    }
    // \p{N}{1,kMaxDigits}, repeated while digits follow
    if (s.number(pos)) {
      size_t run = 0;
      while (s.number(pos) && run < kMaxDigits) {
        ++pos;
        ++run;
      }
      s.cut(pos);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". A lone space at the end of the piece also lands here and
    // becomes a word of its own, as \s+ would make it.
    const bool lead_space = s.at(pos) == ' ';
    if (symbol(pos) || (lead_space && (symbol(pos + 1) || !s.inside(pos + 1)))) {
      pos += lead_space ? 1 : 0;
      while (symbol(pos)) ++pos;
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

// The expressions of each pre-tokenizer, in the order they split.
std::vector<Step> steps_of(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::Default:
      return {isolate<run<default_symbol>>, split_gpt2, isolate<run<number>>,
              isolate<digit_triple>};
    case PreTokenizer::Gpt2:
      return {split_gpt2};
    case PreTokenizer::Falcon:
      return {isolate<run<falcon_symbol>>, split_gpt2, isolate<digit_triple>};
    case PreTokenizer::StarCoder:
      return {isolate<one<number>>, split_gpt2};
    case PreTokenizer::Llama3:
      return {split_llama3<3, false>};
    case PreTokenizer::Qwen2:
      return {split_llama3<1, false>};
    case PreTokenizer::Qwen35:
      return {split_llama3<1, true>};
    case PreTokenizer::DeepSeekCoder:
      return {isolate<one<line_break>>, isolate<spaced_run<letter>>,
              isolate<spaced_run<punctuation>>, isolate<run<deepseek_cjk>>, isolate<one<number>>};
    case PreTokenizer::DeepSeekLlm:
      return {isolate<one<line_break>>, isolate<spaced_run<cased_letter>>,
              isolate<spaced_run<deepseek_punctuation>>, isolate_trailing_whitespace,
              isolate<run<deepseek_cjk>>, isolate<run<number>>};
    case PreTokenizer::Newlines:
      return {isolate<run<newline>>};
  }
  return {};
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
  Lengths pieces = {cps.size()};
  for (const Step step : steps_of(pre)) {
    Lengths next;
    next.reserve(pieces.size());
    size_t begin = 0;
    for (const size_t length : pieces) {
      Scanner s(cps, begin, begin + length, next);
      step(s, begin, begin + length);
      begin += length;
    }
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  size_t begin = 0;
  for (const size_t length : pieces) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + length; ++i) unicode::append_utf8(word, cps[i]);
    begin += length;
  }
  return words;
}

}  // namespace veloxquant
