// Special tokens as llama.cpp handles them: finding their text in the input before tokenizing,
// and recognising the ones that end generation by their text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/vocab.h"

namespace veloxquant {

// A piece of the input: plain text to tokenize, or a special token found in it.
struct Fragment {
  std::string_view text;  // empty for a token
  int32_t token = -1;     // >= 0 for a special token
};

// The tokens whose text is matched in the input before tokenizing: control, unknown and
// user-defined ones, longest text first (ties by id, which llama.cpp leaves unspecified).
std::vector<int32_t> special_tokens_by_length(const Vocab& vocab);

// Splits `text` at every occurrence of the listed tokens' texts, taking the tokens in list order
// and each one's occurrences left to right within what earlier tokens left as text. Control and
// unknown tokens are skipped unless parse_special is set; user-defined tokens always match.
std::vector<Fragment> split_at_special_tokens(std::string_view text, const Vocab& vocab,
                                              const std::vector<int32_t>& specials,
                                              bool parse_special);

// The tokens that end generation, sorted: `declared` (EOS, EOT, EOM and FIM ids from the metadata;
// negative entries are skipped) plus every token whose text llama.cpp recognises as ending
// generation ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", FIM padding, ...). Those recognised by
// text become control tokens in `vocab`, as llama.cpp overrides their type. llama.cpp's two
// exceptions apply: "<|end|>" does not end generation beside "<|return|>" and "<|call|>" (or
// "<|calls|>" and "<|flush|>"), and "</s>" not beside "<|tool_response>" or "<|plamo:eos|>".
std::vector<int32_t> find_end_of_generation_tokens(Vocab& vocab,
                                                   const std::vector<int32_t>& declared);

}  // namespace veloxquant
