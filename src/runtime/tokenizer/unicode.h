// The little Unicode the tokenizers need, without ICU: UTF-8 decoding with llama.cpp's treatment
// of bad input, the letter / number / punctuation / mark / whitespace classes of the BPE
// pre-tokenizers, and GPT-2's byte-to-character alphabet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace veloxquant::unicode {

constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Bytes in the UTF-8 sequence that `lead` starts, judged from its top four bits alone (1 for a
// stray continuation byte), as llama.cpp splits text into characters.
size_t utf8_sequence_length(uint8_t lead);

// Code points of `text`. A malformed sequence (bad lead byte, missing continuation byte, or a
// value above U+10FFFF) becomes U+FFFD and decoding resumes at the next byte; overlong forms and
// surrogates decode to their value, as llama.cpp does.
std::vector<uint32_t> decode_utf8(std::string_view text);
// REQUIRES: cp <= 0x10FFFF.
void append_utf8(std::string& out, uint32_t cp);

enum CodepointFlag : uint8_t {
  kLetter = 1, kNumber = 2, kWhitespace = 4, kPunctuation = 8, kMark = 16,
};

// kLetter for \p{L}, kNumber for \p{N}, kPunctuation for \p{P}, kMark for \p{M} (combining
// marks), kWhitespace for White_Space (what \s matches).
uint8_t codepoint_flags(uint32_t cp);

// GPT-2's byte-level alphabet: every byte maps to one printable character, so that byte strings
// become text that BPE vocabularies can store.
uint32_t byte_to_codepoint(uint8_t byte);
// The byte a character of that alphabet stands for, or -1 for any other character.
int codepoint_to_byte(uint32_t cp);

// The generated table behind codepoint_flags: runs of equal flags, sorted by first code point,
// the first starting at 0.
struct CodepointRange {
  uint32_t first;
  uint8_t flags;
};
extern const CodepointRange kCodepointRanges[];
extern const size_t kCodepointRangeCount;

}  // namespace veloxquant::unicode
