// Byte-level BPE pre-tokenizers: split text into the words that BPE merges within, by the regular
// expressions of tokenizer.ggml.pre, written out by hand (std::regex has no \p{L}).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace veloxquant {

enum class PreTokenizer {
  // llama.cpp's fallback: GPT-2's expression between three isolating splits (punctuation runs
  // before it; number runs and then runs of three ASCII digits after it).
  Default,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // Llama3's expression with \p{N} (single digits) in place of \p{N}{1,3}.
  Qwen2,
};

// What llama.cpp derives from a tokenizer.ggml.pre value besides the expression.
struct PreTokenizerConfig {
  PreTokenizer kind = PreTokenizer::Default;
  // A word that is itself a vocabulary entry becomes that token without merging (llama.cpp's
  // ignore_merges, set for the llama-3 family).
  bool whole_word_tokens = false;
  // BOS is prepended when tokenizer.ggml.add_bos_token is absent.
  bool add_bos_by_default = false;
};

// The configuration llama.cpp selects for a tokenizer.ggml.pre value ("" gives Default, as in
// llama.cpp). Throws FormatError listing the supported names for any other value.
PreTokenizerConfig pre_tokenizer_config(std::string_view name);

// The words of `text`, in order; their concatenation is `text` with malformed UTF-8 replaced by
// U+FFFD (see unicode::decode_utf8).
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace veloxquant
