// Splits a template into text and the tokens of its {{ }} and {% %} tags, applying jinja2's
// whitespace rules as Hugging Face configures them (trim_blocks, lstrip_blocks, `-` and `+`
// markers, one trailing newline dropped); comments vanish and {% raw %} becomes text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace veloxquant::chat_template {

enum class TokenKind {
  Text,
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,
  String,   // text holds the decoded value
  Integer,  // text holds the digits, underscores removed
  Float,
  Operator,
  End,  // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

// Throws ChatTemplateError naming the line for an unterminated tag, comment, raw block or string.
std::vector<Token> tokenize(std::string_view source);

}  // namespace veloxquant::chat_template
