#include "runtime/chat_template/lexer.h"

#include <cstdio>

#include "runtime/chat_template/syntax_error.h"
#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

// jinja2 treats \r\n, \r and \n as line breaks and writes each as \n; a template's last newline
// is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit_byte(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit_byte(c); }

// Whether every code point of text is whitespace (and there is at least one).
bool all_whitespace(std::string_view text) {
  if (text.empty()) return false;
  for (const char32_t cp : decode_utf8(text))
    if (!is_python_space(cp)) return false;
  return true;
}

// Python's "unicode-escape" decoding of a string literal's body, after jinja2 has written every
// non-ASCII character as its backslash escape (so "\é" keeps its backslash).
std::string decode_string_literal(std::string_view body, int line) {
  std::string out;
  const std::vector<char32_t> cps = decode_utf8(body);
  auto hex_value = [&](size_t start, size_t count, size_t& consumed) -> char32_t {
    char32_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      if (start + k >= cps.size()) throw_syntax_error(line, "truncated \\x, \\u or \\U escape in a string");
      const char32_t c = cps[start + k];
      int d;
      if (c >= '0' && c <= '9') d = static_cast<int>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<int>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<int>(c - 'A' + 10);
      else throw_syntax_error(line, "bad \\x, \\u or \\U escape in a string");
      v = v * 16 + static_cast<char32_t>(d);
    }
    consumed = count;
    return v;
  };
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c != '\\') {
      append_utf8(out, c);
      continue;
    }
    if (i + 1 >= cps.size()) throw_syntax_error(line, "a string ends with a lone backslash");
    const char32_t e = cps[++i];
    size_t used = 0;
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': append_utf8(out, hex_value(i + 1, 2, used)), i += used; break;
      case 'u': append_utf8(out, hex_value(i + 1, 4, used)), i += used; break;
      case 'U': {
        const char32_t cp = hex_value(i + 1, 8, used);
        if (cp > 0x10FFFF) throw_syntax_error(line, "\\U escape beyond U+10FFFF in a string");
        append_utf8(out, cp), i += used;
        break;
      }
      case 'N': throw_syntax_error(line, "\\N{...} escapes in strings are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < cps.size() && cps[i + 1] >= '0' && cps[i + 1] <= '7'; ++k)
            v = v * 8 + (cps[++i] - '0');
          append_utf8(out, v);
        } else if (e >= 0x80) {
          // jinja2 first rewrote the character as \xNN, \uNNNN or \UNNNNNNNN; the original
          // backslash escapes the escape's own backslash.
          char buf[16];
          if (e < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(e));
          else if (e < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(e));
          else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(e));
          out += buf;
        } else {
          out += '\\';
          append_utf8(out, e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t start = find_opener(pos_);
      if (start == std::string::npos) {
        emit_text(src_.substr(pos_));
        pos_ = src_.size();
        break;
      }
      const char kind = src_[start + 1];
      const char sign = (start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+'))
                            ? src_[start + 2]
                            : '\0';
      std::string text = src_.substr(pos_, start - pos_);
      if (sign == '-') {
        text = strip(text, nullptr, StripSide::Right);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone after indentation takes the indentation.
        const size_t line_begin = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_begin > 0 || line_starting_) && all_whitespace(std::string_view(text).substr(line_begin)))
          text.resize(line_begin);
      }
      line_ += count_newlines(src_.substr(pos_, start - pos_)) - count_newlines(text);
      emit_text(text);
      pos_ = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && try_raw()) {
        continue;
      } else {
        lex_tag(kind == '{');
      }
    }
    tokens_.push_back({TokenKind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  static int count_newlines(std::string_view s) {
    int n = 0;
    for (const char c : s) n += c == '\n';
    return n;
  }

  size_t find_opener(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string text) {
    if (text.empty()) return;
    const int line = line_;
    line_ += count_newlines(text);
    tokens_.push_back({TokenKind::Text, std::move(text), line});
  }

  // After a tag's closing marker: `-` eats all whitespace, a plain block or comment end eats one
  // newline (trim_blocks), `+` eats nothing. Records whether the match ended a line, which
  // lstrip_blocks needs for the next tag.
  void finish_tag(char sign, bool is_block_or_comment) {
    size_t end = pos_;
    if (sign == '-') {
      while (end < src_.size()) {
        const std::vector<char32_t> one = decode_utf8(std::string_view(src_).substr(end, 4));
        if (one.empty() || !is_python_space(one[0])) break;
        std::string enc;
        append_utf8(enc, one[0]);
        end += enc.size();
      }
    } else if (sign != '+' && is_block_or_comment && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = end > pos_ ? src_[end - 1] == '\n' : false;
    line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
    pos_ = end;
  }

  void lex_comment() {
    const int start_line = line_;
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      char sign = '\0';
      if ((src_[i] == '-' || src_[i] == '+') && src_.compare(i + 1, 2, "#}") == 0) sign = src_[i];
      else if (src_.compare(i, 2, "#}") != 0) continue;
      line_ += count_newlines(std::string_view(src_).substr(pos_, i - pos_));
      pos_ = i + (sign ? 3 : 2);
      finish_tag(sign, true);
      return;
    }
    throw_syntax_error(start_line, "missing end of comment tag '#}'");
  }

  // {% raw %}...{% endraw %}: the body is text, tags and all.
  bool try_raw() {
    size_t i = pos_;
    while (i < src_.size() && is_space_byte(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && is_name_char(src_[i + 3]))) return false;
    i += 3;
    while (i < src_.size() && is_space_byte(src_[i])) ++i;
    char sign = '\0';
    if (src_.compare(i, 3, "-%}") == 0) sign = '-';
    else if (src_.compare(i, 2, "%}") != 0) return false;
    const int start_line = line_;
    line_ += count_newlines(std::string_view(src_).substr(pos_, i - pos_));
    pos_ = i + (sign ? 3 : 2);
    if (sign == '-') finish_tag('-', true);  // jinja2's raw begin knows only `-`, not trim_blocks
    else line_starting_ = false;
    for (size_t j = src_.find("{%", pos_); j != std::string::npos; j = src_.find("{%", j + 1)) {
      size_t k = j + 2;
      char end_sign = '\0';
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) end_sign = src_[k++];
      while (k < src_.size() && is_space_byte(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && is_space_byte(src_[k])) ++k;
      char close_sign = '\0';
      if (src_.compare(k, 3, "-%}") == 0 || src_.compare(k, 3, "+%}") == 0) close_sign = src_[k++];
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::string body = src_.substr(pos_, j - pos_);
      if (end_sign == '-') {
        body = strip(body, nullptr, StripSide::Right);
      } else if (end_sign != '+') {
        const size_t line_begin = body.rfind('\n') == std::string::npos ? 0 : body.rfind('\n') + 1;
        if ((line_begin > 0 || line_starting_) && all_whitespace(std::string_view(body).substr(line_begin)))
          body.resize(line_begin);
      }
      emit_text(body);
      pos_ = k + 2;
      line_ = 1 + count_newlines(std::string_view(src_).substr(0, pos_));
      finish_tag(close_sign, true);
      return true;
    }
    throw_syntax_error(start_line, "missing {% endraw %} for the {% raw %} block");
  }

  void lex_tag(bool variable) {
    const int start_line = line_;
    tokens_.push_back({variable ? TokenKind::VariableBegin : TokenKind::BlockBegin, "", line_});
    int depth = 0;
    const char close = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && is_space_byte(src_[pos_])) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size())
        throw_syntax_error(start_line, std::string("unexpected end of template, expected '") + close + "}'");
      if (depth == 0) {
        char sign = '\0';
        size_t p = pos_;
        if (src_[p] == '-' || (src_[p] == '+' && !variable)) sign = src_[p++];
        if (src_.compare(p, 2, std::string(1, close) + "}") == 0) {
          tokens_.push_back({variable ? TokenKind::VariableEnd : TokenKind::BlockEnd, "", line_});
          pos_ = p + 2;
          finish_tag(sign, !variable);
          return;
        }
      }
      lex_expression_token(depth);
    }
  }

  void lex_expression_token(int& depth) {
    const char c = src_[pos_];
    if (is_digit_byte(c)) return lex_number();
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
      tokens_.push_back({TokenKind::Name, src_.substr(start, pos_ - start), line_});
      return;
    }
    if (c == '\'' || c == '"') return lex_string(c);
    static const char* const kTwoChar[] = {"**", "//", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenKind::Operator, op, line_});
        pos_ += 2;
        return;
      }
    }
    static const std::string kOneChar = "+-/*%~[](){}><=.:|,;";
    if (kOneChar.find(c) == std::string::npos)
      throw_syntax_error(line_, std::string("unexpected character '") + c + "' in a tag");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) throw_syntax_error(line_, std::string("unexpected '") + c + "'");
      --depth;
    }
    tokens_.push_back({TokenKind::Operator, std::string(1, c), line_});
    ++pos_;
  }

  // Digits with optional underscores between them.
  size_t scan_digits(size_t p) const {
    if (p >= src_.size() || !is_digit_byte(src_[p])) return p;
    ++p;
    while (p < src_.size()) {
      if (is_digit_byte(src_[p])) ++p;
      else if (src_[p] == '_' && p + 1 < src_.size() && is_digit_byte(src_[p + 1])) p += 2;
      else break;
    }
    return p;
  }

  void lex_number() {
    const size_t start = pos_;
    const bool after_dot = start > 0 && src_[start - 1] == '.';  // `x.0.1` is two subscripts
    size_t p = scan_digits(start);
    bool is_float = false;
    if (!after_dot) {
      size_t q = p;
      if (q + 1 < src_.size() && src_[q] == '.' && is_digit_byte(src_[q + 1]))
        q = scan_digits(q + 1), is_float = true;
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t r = q + 1;
        if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
        const size_t e = scan_digits(r);
        if (e > r) q = e, is_float = true;
      }
      if (is_float) p = q;
    }
    if (!is_float && src_[start] == '0' && p < src_.size() &&
        (src_[p] == 'x' || src_[p] == 'X' || src_[p] == 'o' || src_[p] == 'O' || src_[p] == 'b' ||
         src_[p] == 'B'))
      throw_syntax_error(line_, "hexadecimal, octal and binary integer literals are not supported");
    std::string digits;
    for (size_t i = start; i < p; ++i)
      if (src_[i] != '_') digits += src_[i];
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, digits, line_});
    pos_ = p;
  }

  void lex_string(char quote) {
    const int start_line = line_;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) throw_syntax_error(start_line, "unterminated string literal");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, p - pos_ - 1);
    tokens_.push_back({TokenKind::String, decode_string_literal(body, start_line), start_line});
    line_ += count_newlines(body);
    pos_ = p + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace veloxquant::chat_template
