#include "runtime/chat_template/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

Value from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) fail("JSON nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(None{});
    case nlohmann::ordered_json::value_t::boolean: return json.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer: return json.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        fail("JSON integer " + std::to_string(u) + " exceeds 64 bits");
      return static_cast<int64_t>(u);
    }
    case nlohmann::ordered_json::value_t::number_float: return json.get<double>();
    case nlohmann::ordered_json::value_t::string: return json.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(json.size());
      for (const auto& [key, value] : json.items())
        items.emplace_back(Value(key), from_json_at(value, depth + 1));
      return make_dict(std::move(items));
    }
    default: fail("unsupported JSON value (binary or discarded)");
  }
}

void write_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (const char32_t cp : decode_utf8(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
          if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          append_utf8(out, cp);
        }
      }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return python_float(d);
}

// json.dumps turns keys into strings: str keys as they are, numbers by their repr, booleans as
// true/false, None as null.
std::string key_text(const Value& key) {
  if (key.is_string()) return key.as_string();
  if (key.is_bool()) return key.as_bool() ? "true" : "false";
  if (key.is_none()) return "null";
  if (key.is_int()) return std::to_string(key.as_int());
  if (key.is_float()) return json_float(key.as_float());
  fail("keys must be str, int, float, bool or None, not " + type_name(key));
}

void write_value(std::string& out, const Value& v, const JsonStyle& style, int level) {
  auto newline = [&](int at) {
    if (!style.indent) return;
    check_string_size(out.size() + 1 + static_cast<size_t>(at) * style.indent->size());
    out += '\n';
    for (int i = 0; i < at; ++i) out += *style.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    out += json_float(v.as_float());
  } else if (v.is_string()) {
    write_string(out, v.as_string(), style.ensure_ascii);
    check_string_size(out.size());
  } else if (v.is_list()) {
    const auto& items = v.as_list().items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += style.item_separator;
      newline(level + 1);
      write_value(out, items[i], style, level + 1);
    }
    newline(level);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [key, value] : v.as_dict().items) entries.emplace_back(key_text(key), &value);
    if (style.sort_keys) {
      for (const auto& [key, value] : v.as_dict().items)
        if (!key.is_string()) fail("tojson with sort_keys needs string keys, found " + type_name(key));
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    if (entries.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += style.item_separator;
      newline(level + 1);
      write_string(out, entries[i].first, style.ensure_ascii);
      out += style.key_separator;
      write_value(out, *entries[i].second, style, level + 1);
    }
    newline(level);
    out += '}';
  } else {
    fail("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 1); }

std::string to_json(const Value& value, const JsonStyle& style) {
  std::string out;
  write_value(out, value, style, 0);
  return out;
}

}  // namespace veloxquant::chat_template
