// llama.cpp's SentencePiece-style tokenizer ("llama" vocabularies): greedy merging of adjacent
// symbols by vocabulary score, with byte fallback.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/vocab.h"

namespace veloxquant {

// Appends the ids of `text` to `out`. The text must already be normalised (spaces replaced by
// U+2581, the space prefix added). It starts as one symbol per UTF-8 character; the adjacent pair
// whose concatenation is a vocabulary entry of the highest score (the leftmost among equals) is
// merged until no pair is an entry. A symbol that is not an entry becomes one <0xXX> token per
// byte, or the byte's own single-character token, or else `unk` (Error if unk is -1).
void spm_tokenize(const Vocab& vocab, int32_t unk, std::string_view text,
                  std::vector<int32_t>& out);

}  // namespace veloxquant
