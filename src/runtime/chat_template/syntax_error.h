// The one way the lexer and parser report a template they cannot accept.
#pragma once

#include <string>

#include "veloxquant/chat_template.h"

namespace veloxquant::chat_template {

[[noreturn]] inline void throw_syntax_error(int line, const std::string& message) {
  throw ChatTemplateError("chat template line " + std::to_string(line) + ": " + message);
}

}  // namespace veloxquant::chat_template
