// Tokens to statements and expressions, with jinja2's grammar and operator precedence (filters
// and tests bind tighter than arithmetic; `~` binds tighter than + and -).
#pragma once

#include <string_view>

#include "runtime/chat_template/ast.h"

namespace veloxquant::chat_template {

// Throws ChatTemplateError naming the line for a syntax error, an unknown filter or test, or a
// construct the engine does not support (extends, include, import, recursive loops, ...).
Body parse_template(std::string_view source);

}  // namespace veloxquant::chat_template
