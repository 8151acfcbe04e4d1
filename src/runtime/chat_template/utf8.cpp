#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

std::vector<char32_t> decode_utf8(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    int extra = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      extra = 1, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      extra = 2, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      extra = 3, cp = b0 & 0x07;
    } else {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    bool ok = i + static_cast<size_t>(extra) < text.size();
    for (int k = 1; ok && k <= extra; ++k) {
      const auto b = static_cast<uint8_t>(text[i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (b & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += 1 + extra;
  }
  return out;
}

std::string encode_utf8(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
  return out;
}

size_t count_code_points(std::string_view text) {
  size_t n = 0;
  for (const char c : text)
    if ((static_cast<uint8_t>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_python_printable(char32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF) return false;
  if ((cp >= 0xD800 && cp <= 0xF8FF) || (cp >= 0xFFF0 && cp <= 0xFFFB) || cp >= 0xF0000) return false;
  return true;
}

namespace {

// Pairs of (upper, lower) ranges that differ by a constant offset.
struct CaseRange {
  char32_t upper_first, upper_last;
  int32_t offset;  // lower = upper + offset
};
constexpr CaseRange kCaseRanges[] = {
    {0x41, 0x5A, 32},   {0xC0, 0xD6, 32},   {0xD8, 0xDE, 32},   {0x391, 0x3A1, 32},
    {0x3A3, 0x3AB, 32}, {0x410, 0x42F, 32}, {0x400, 0x40F, 80}, {0x388, 0x38A, 37},
};

}  // namespace

char32_t to_lower(char32_t cp) {
  if (cp == 0x178) return 0xFF;
  for (const CaseRange& r : kCaseRanges)
    if (cp >= r.upper_first && cp <= r.upper_last) return cp + r.offset;
  if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
    // Latin Extended-A pairs: even/odd, except 0x139..0x148 and 0x179..0x17E which are odd/even.
    const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if (odd_upper ? (cp % 2 == 1) : (cp % 2 == 0)) return cp + 1;
  }
  if (cp == 0x386) return 0x3AC;
  return cp;
}

char32_t to_upper(char32_t cp) {
  for (const CaseRange& r : kCaseRanges)
    if (cp >= r.upper_first + r.offset && cp <= r.upper_last + r.offset) return cp - r.offset;
  if (cp == 0x3C2) return 0x3A3;  // final sigma
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp >= 0x100 && cp <= 0x17F && cp != 0x130 && cp != 0x131 && cp != 0x138 && cp != 0x149 && cp != 0x17F) {
    const bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if (odd_upper ? (cp % 2 == 0) : (cp % 2 == 1)) return cp - 1;
  }
  if (cp == 0x3AC) return 0x386;
  return cp;
}

bool is_cased_upper(char32_t cp) { return to_lower(cp) != cp; }
bool is_cased_lower(char32_t cp) { return to_upper(cp) != cp || cp == 0xDF; }
bool is_alpha(char32_t cp) {
  return (cp < 0x80) ? ((cp | 32) >= 'a' && (cp | 32) <= 'z') : (is_cased_upper(cp) || is_cased_lower(cp));
}
bool is_digit(char32_t cp) { return cp >= '0' && cp <= '9'; }

std::string upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t cp : decode_utf8(text)) {
    if (cp == 0xDF) out += "SS";
    else append_utf8(out, to_upper(cp));
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t cp : decode_utf8(text)) append_utf8(out, to_lower(cp));
  return out;
}

std::string strip(std::string_view text, const std::string* chars, StripSide side) {
  const std::vector<char32_t> cps = decode_utf8(text);
  const std::vector<char32_t> set = chars ? decode_utf8(*chars) : std::vector<char32_t>{};
  auto strippable = [&](char32_t cp) {
    if (!chars) return is_python_space(cp);
    for (const char32_t c : set)
      if (c == cp) return true;
    return false;
  };
  size_t begin = 0, end = cps.size();
  if (side != StripSide::Right)
    while (begin < end && strippable(cps[begin])) ++begin;
  if (side != StripSide::Left)
    while (end > begin && strippable(cps[end - 1])) --end;
  return encode_utf8(cps, begin, end);
}

}  // namespace veloxquant::chat_template
