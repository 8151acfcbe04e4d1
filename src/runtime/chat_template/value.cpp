#include "runtime/chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

void fail(std::string message) { throw RenderFailure{std::move(message)}; }

void fail_undefined(const Value& v) { fail(v.as_undefined().hint); }

void check_string_size(size_t bytes) {
  if (bytes > kMaxStringBytes)
    fail("a string of " + std::to_string(bytes) + " bytes exceeds the " +
         std::to_string(kMaxStringBytes >> 20) + " MiB limit");
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, value] : items)
    if (equals(k, key)) return &value;
  return nullptr;
}

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, value] : items)
    if (k.is_string() && k.as_string() == key) return &value;
  return nullptr;
}

Value* Namespace::find(std::string_view name) {
  for (auto& [k, value] : attrs)
    if (k == name) return &value;
  return nullptr;
}

int depth_of(const Value& v) {
  if (v.is_list()) return v.as_list().depth;
  if (v.is_dict()) return v.as_dict().depth;
  return 0;
}

namespace {

void check_depth(int depth) {
  if (depth > kMaxValueDepth)
    fail("a list or dict nested " + std::to_string(depth) + " deep; at most " +
         std::to_string(kMaxValueDepth) + " levels are supported");
}

}  // namespace

Value make_list(std::vector<Value> items, bool tuple) {
  auto data = std::make_shared<ListData>();
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, depth_of(item));
  data->depth = depth + 1;
  check_depth(data->depth);
  data->items = std::move(items);
  data->tuple = tuple;
  return Value(Value::List(std::move(data)));
}

Value make_dict(std::vector<std::pair<Value, Value>> items) {
  auto data = std::make_shared<DictData>();
  int depth = 0;
  for (auto& item : items) {
    Value& key = item.first;
    Value& value = item.second;
    depth = std::max({depth, depth_of(key), depth_of(value)});
    if (key.is_list() || key.is_dict() || key.is_namespace() || key.is_undefined())
      fail("unhashable type: '" + type_name(key) + "' used as a dict key");
    const auto existing = std::find_if(data->items.begin(), data->items.end(),
                                       [&](const auto& stored) { return equals(stored.first, key); });
    if (existing != data->items.end()) existing->second = std::move(value);
    else data->items.emplace_back(std::move(key), std::move(value));
  }
  data->depth = depth + 1;
  check_depth(data->depth);
  return Value(Value::Dict(std::move(data)));
}

Value make_function(std::string name, std::function<Value(CallArgs&)> call) {
  return Value(std::make_shared<const Function>(Function{std::move(name), std::move(call)}));
}

bool truthy(const Value& v) {
  return std::visit(
      [](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined> || std::is_same_v<T, None>) return false;
        else if constexpr (std::is_same_v<T, bool>) return x;
        else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) return x != 0;
        else if constexpr (std::is_same_v<T, std::string>) return !x.empty();
        else if constexpr (std::is_same_v<T, Value::List> || std::is_same_v<T, Value::Dict>)
          return !x->items.empty();
        else return true;
      },
      v.v);
}

std::string type_name(const Value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return v.as_list().tuple ? "tuple" : "list";
  if (v.is_dict()) return "dict";
  if (v.is_namespace()) return "Namespace";
  return "function";
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form, then Python's choice of layout: fixed for
  // decimal exponents -4..15, scientific (two-digit exponent at least) otherwise.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (const char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string python_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (const char32_t cp : decode_utf8(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!is_python_printable(cp)) {
      char buf[16];
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      append_utf8(out, cp);
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  if (v.is_string()) return python_str_repr(v.as_string());
  if (v.is_list()) {
    const ListData& list = v.as_list();
    std::string out = list.tuple ? "(" : "[";
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i) out += ", ";
      out += repr(list.items[i]);
    }
    if (list.tuple && list.items.size() == 1) out += ",";
    return out + (list.tuple ? ")" : "]");
  }
  if (v.is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : v.as_dict().items) {
      if (!first) out += ", ";
      first = false;
      out += repr(key) + ": " + repr(value);
    }
    return out + "}";
  }
  if (v.is_namespace()) {
    std::string out = "<Namespace {";
    bool first = true;
    for (const auto& [key, value] : v.as_namespace().attrs) {
      if (!first) out += ", ";
      first = false;
      out += python_str_repr(key) + ": " + repr(value);
    }
    return out + "}>";
  }
  return to_str(v);
}

std::string to_str(const Value& v) {
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Undefined>) return "";
        else if constexpr (std::is_same_v<T, None>) return "None";
        else if constexpr (std::is_same_v<T, bool>) return x ? "True" : "False";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) return python_float(x);
        else if constexpr (std::is_same_v<T, std::string>) return x;
        else if constexpr (std::is_same_v<T, Value::Fn>) return "<" + x->name + ">";
        else return repr(v);
      },
      v.v);
}

double number_as_double(const Value& v) {
  if (v.is_int()) return static_cast<double>(v.as_int());
  if (v.is_float()) return v.as_float();
  if (v.is_bool()) return v.as_bool() ? 1.0 : 0.0;
  if (v.is_undefined()) fail_undefined(v);
  fail("expected a number, got " + type_name(v));
}

namespace {

bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t integral(const Value& v) { return v.is_int() ? v.as_int() : (v.as_bool() ? 1 : 0); }

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return integral(a) == integral(b);
    return number_as_double(a) == number_as_double(b);
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.as_string() == b.as_string();
  if (a.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x.items.size(); ++i)
      if (!equals(x.items[i], y.items[i])) return false;
    return true;
  }
  if (a.is_dict()) {
    const auto& x = a.as_dict();
    const auto& y = b.as_dict();
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [key, value] : x.items) {
      const Value* other = y.find(key);
      if (!other || !equals(value, *other)) return false;
    }
    return true;
  }
  if (a.is_namespace()) return std::get<Value::Ns>(a.v) == std::get<Value::Ns>(b.v);
  return std::get<Value::Fn>(a.v) == std::get<Value::Fn>(b.v);
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) {
      const int64_t x = integral(a), y = integral(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const double x = number_as_double(a), y = number_as_double(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace veloxquant::chat_template
