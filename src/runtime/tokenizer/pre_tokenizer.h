// BPE pre-tokenizers: split text into the words that BPE merges within, by the regular
// expressions llama.cpp selects for tokenizer.ggml.pre, written out by hand (std::regex has no
// \p{L}). Most are a chain of expressions, each splitting the pieces of the one before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace veloxquant {

enum class PreTokenizer {
  // llama.cpp's fallback: [\p{P}\$\+<=>\^~\|]+, then GPT-2's expression, then \p{N}+, then
  // [0-9][0-9][0-9].
  Default,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // [\p{P}\$\+<=>\^~\|`]+, then GPT-2's expression, then [0-9][0-9][0-9].
  Falcon,
  // \p{N} (every digit a word), then GPT-2's expression: StarCoder, Refact, Command-R.
  StarCoder,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // Llama3's expression with \p{N} (single digits) in place of \p{N}{1,3}.
  Qwen2,
  // Qwen2's expression with [\p{L}\p{M}]+ for letters, so combining marks stay with their word.
  Qwen35,
  // [\r\n], then \s?\p{L}+, then \s?\p{P}+, then [一-龥ࠀ-一가-퟿]+, then \p{N}.
  DeepSeekCoder,
  // [\r\n], then \s? and a run of cased letters (Latin, Greek, Cyrillic, ...), then \s? and a
  // run of ASCII or full-width punctuation, then \s+$, then [一-龥ࠀ-一가-퟿]+, then \p{N}+.
  DeepSeekLlm,
  // [^\n]+|[\n]+: Gemma 4 merges whole lines, split only at runs of newlines.
  Newlines,
};

// Which words skip merging and become their vocabulary entry directly.
enum class WholeWords : uint8_t {
  Never,
  Always,       // any word that is an entry (llama.cpp's ignore_merges, the llama-3 family)
  NewlineRuns,  // a run of newlines that is an entry (Gemma 4, whose merges hold no newline)
};

// Whether BOS is prepended to encoded text: as tokenizer.ggml.add_bos_token says, with a default
// for when it is absent, or always (llama.cpp overrides a false there for Gemma 4).
enum class AddBos : uint8_t { DefaultNo, DefaultYes, Always };

// What llama.cpp derives from a tokenizer.ggml.pre value besides the expression.
struct PreTokenizerConfig {
  PreTokenizer kind = PreTokenizer::Default;
  WholeWords whole_words = WholeWords::Never;
  AddBos add_bos = AddBos::DefaultNo;
  // SentencePiece-style BPE (Gemma 4): spaces become U+2581 before splitting, words are merged
  // as UTF-8 rather than in GPT-2's byte alphabet, and a byte without an entry falls back to its
  // <0xXX> token.
  bool sentencepiece_style = false;
};

// The configuration llama.cpp selects for a tokenizer.ggml.pre value ("" gives Default, as in
// llama.cpp). Throws FormatError naming the value and listing the supported ones for any other.
PreTokenizerConfig pre_tokenizer_config(std::string_view name);

// The words of `text`, in order; their concatenation is `text` with malformed UTF-8 replaced by
// U+FFFD (see unicode::decode_utf8).
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace veloxquant
