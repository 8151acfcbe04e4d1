// UTF-8 helpers for the chat-template engine: templates index, slice, strip and case-map strings by
// code point, as Python's str does, while values keep their UTF-8 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/unicode.h"

namespace veloxquant::chat_template {

// Encoding a code point is the tokenizer's (runtime/tokenizer/unicode.h).
using unicode::append_utf8;

// The code points of `text`; a malformed byte becomes U+FFFD so that no input can fail here.
std::vector<char32_t> decode_utf8(std::string_view text);
std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end);
size_t count_code_points(std::string_view text);

// Python's str.isspace() for one code point (the set str.strip() and str.split() use).
bool is_python_space(char32_t cp);
// Python's str.isprintable(), approximated: control, format, separator (except space) and
// private-use characters of the ranges chat text meets are not printable.
bool is_python_printable(char32_t cp);
// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other code points
// map to themselves (Python maps all of Unicode; see docs/chat_template.md).
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
bool is_cased_upper(char32_t cp);
bool is_cased_lower(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);

std::string upper(std::string_view text);  // Python str.upper() (ß becomes SS)
std::string lower(std::string_view text);

// Python's str.strip([chars]) family; `chars` absent strips Python whitespace.
enum class StripSide { Both, Left, Right };
std::string strip(std::string_view text, const std::string* chars, StripSide side);

}  // namespace veloxquant::chat_template
