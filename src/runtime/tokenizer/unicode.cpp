#include "runtime/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace veloxquant::unicode {

size_t utf8_sequence_length(uint8_t lead) {
  static constexpr std::array<uint8_t, 16> kByHighNibble = {1, 1, 1, 1, 1, 1, 1, 1,
                                                            1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

namespace {

bool is_continuation(std::string_view text, size_t i) {
  return i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80;
}

// The code point starting at text[i] and its length, or {kReplacementCharacter, 1} if malformed.
std::pair<uint32_t, size_t> decode_one(std::string_view text, size_t i) {
  const uint8_t lead = static_cast<uint8_t>(text[i]);
  size_t n = 0;
  uint32_t cp = 0;
  if (lead < 0x80) return {lead, 1};
  if (lead < 0xC0) return {kReplacementCharacter, 1};  // a continuation byte cannot lead
  if (lead < 0xE0) {
    n = 2;
    cp = lead & 0x1F;
  } else if (lead < 0xF0) {
    n = 3;
    cp = lead & 0x0F;
  } else if (lead < 0xF8) {
    n = 4;
    cp = lead & 0x07;
  } else {
    return {kReplacementCharacter, 1};
  }
  for (size_t k = 1; k < n; ++k) {
    if (!is_continuation(text, i + k)) return {kReplacementCharacter, 1};
    cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
  }
  // llama.cpp would decode F4 90.. to F7 BF.. and then fail to encode the value again; a
  // replacement character keeps every later step total.
  if (cp > 0x10FFFF) return {kReplacementCharacter, 1};
  return {cp, n};
}

}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto [cp, n] = decode_one(text, i);
    out.push_back(cp);
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint8_t codepoint_flags(uint32_t cp) {
  const CodepointRange* begin = kCodepointRanges;
  const CodepointRange* end = kCodepointRanges + kCodepointRangeCount;
  // The last range whose first code point is <= cp; the table starts at 0, so there is one.
  const CodepointRange* it = std::upper_bound(
      begin, end, cp, [](uint32_t value, const CodepointRange& r) { return value < r.first; });
  return (it - 1)->flags;
}

namespace {

// GPT-2 keeps the printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) as
// themselves and moves the other 68 bytes, in increasing order, to U+0100 onwards.
bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteAlphabet {
  std::array<uint32_t, 256> to_codepoint{};
  std::array<int16_t, 512> to_byte{};  // every mapped code point is below 0x100 + 68

  ByteAlphabet() {
    to_byte.fill(-1);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_codepoint[b] = byte_is_printable(b) ? static_cast<uint32_t>(b) : next++;
      to_byte[to_codepoint[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return byte_alphabet().to_codepoint[byte]; }

int codepoint_to_byte(uint32_t cp) {
  const auto& table = byte_alphabet().to_byte;
  return cp < table.size() ? table[cp] : -1;
}

}  // namespace veloxquant::unicode
