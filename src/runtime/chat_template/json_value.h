// Values from JSON (the request's messages and tools) and to JSON (the `tojson` filter, which
// transformers defines as Python's json.dumps with ensure_ascii=False).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/chat_template/value.h"

namespace veloxquant::chat_template {

// Objects keep their key order. Fails on nesting deeper than kMaxValueDepth.
Value from_json(const nlohmann::ordered_json& json);

struct JsonStyle {
  std::optional<std::string> indent;  // json.dumps' indent: newline and this per level
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// Python's json.dumps(value, ...); fails for values JSON cannot hold (Undefined, macros).
std::string to_json(const Value& value, const JsonStyle& style);

}  // namespace veloxquant::chat_template
