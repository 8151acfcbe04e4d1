// Jinja's operators, attribute and item lookup, slicing, membership, iteration and calls, with
// Python's semantics for each type the templates meet.
#include <cmath>
#include <limits>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

// Built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + std::string temporaries.
std::string quoted_type(const Value& object) {
  std::string out = "'";
  out += type_name(object);
  return out;
}

std::string no_attribute(const Value& object, const std::string& name) {
  return quoted_type(object) + " object' has no attribute '" + name + "'";
}

bool integral(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t as_integral(const Value& v) { return v.is_int() ? v.as_int() : (v.as_bool() ? 1 : 0); }

[[noreturn]] void unsupported_operands(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand types for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) +
       "'");
}

// Python integers do not overflow; ours are 64-bit and fail rather than wrap.
template <class Op>
int64_t checked(Op op_with_overflow, int64_t x, int64_t y, std::string_view op) {
  int64_t result = 0;
  if (op_with_overflow(x, y, &result))
    fail("integer overflow in '" + std::string(op) + "' (values beyond 64 bits are not supported)");
  return result;
}
bool add_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul_overflow(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

Value repeat(const Value& sequence, int64_t count) {
  if (count <= 0)
    return sequence.is_string() ? Value(std::string()) : make_list({}, sequence.as_list().tuple);
  const size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().items.size();
  if (unit > 0 && static_cast<uint64_t>(count) > kMaxStringBytes / unit)
    fail("repeating a value " + std::to_string(count) + " times exceeds the output limit");
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += sequence.as_string();
    return out;
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < count; ++i)
    items.insert(items.end(), sequence.as_list().items.begin(), sequence.as_list().items.end());
  return make_list(std::move(items), sequence.as_list().tuple);
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_string().size() + b.as_string().size());
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return make_list(std::move(items), a.as_list().tuple);
    }
    if (a.is_string() || b.is_string())
      fail("can only concatenate str (not \"" + type_name(a.is_string() ? b : a) + "\") to str");
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && integral(b)) return repeat(a, as_integral(b));
    if ((b.is_string() || b.is_list()) && integral(a)) return repeat(b, as_integral(a));
  }
  if (op == "%" && a.is_string())
    fail("string formatting with '%' is not supported; use ~ or format filters");
  if (!a.is_number() || !b.is_number()) unsupported_operands(op, a, b);
  if (integral(a) && integral(b)) {
    const int64_t x = as_integral(a), y = as_integral(b);
    if (op == "+") return checked(add_overflow, x, y, op);
    if (op == "-") return checked(sub_overflow, x, y, op);
    if (op == "*") return checked(mul_overflow, x, y, op);
    if (op == "/") {
      if (y == 0) fail("division by zero");
      return static_cast<double>(x) / static_cast<double>(y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        fail("integer overflow in '" + std::string(op) + "'");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      return op == "//" ? q : m;
    }
    if (op == "**") {
      if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        result = checked(mul_overflow, result, x, op);
        if (result == 0 || result == 1) break;
      }
      return result;
    }
  }
  const double x = number_as_double(a), y = number_as_double(b);
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "/") {
    if (y == 0) fail("float division by zero");
    return x / y;
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail("float modulo or floor division by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return op == "%" ? m : std::floor((x - m) / y + 0.5);
  }
  if (op == "**") return std::pow(x, y);
  fail("unknown operator '" + std::string(op) + "'");
}

}  // namespace

Value binary_operation(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string left = to_str(a), right = to_str(b);
    check_string_size(left.size() + right.size());
    return left + right;
  }
  return arithmetic(op, a, b);
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_list()) return v.as_list().items;
  if (v.is_undefined()) return {};
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& item : v.as_dict().items) keys.push_back(item.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> chars;
    for (const char32_t cp : decode_utf8(v.as_string())) {
      std::string one;
      append_utf8(one, cp);
      chars.emplace_back(std::move(one));
    }
    return chars;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) fail_undefined(object);
  if (std::optional<Value> method = find_method(object, name)) return *method;
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(std::string_view(name))) return *v;
  } else if (object.is_namespace()) {
    if (const Value* v = object.as_namespace().find(name)) return *v;
  }
  return Value::undefined(no_attribute(object, name));
}

namespace {

// Python's index normalisation for v[i]; nullopt when out of range.
std::optional<size_t> normalize_index(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  if (index < 0 || static_cast<uint64_t>(index) >= size) return std::nullopt;
  return static_cast<size_t>(index);
}

}  // namespace

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  if (key.is_undefined() && !object.is_dict()) fail_undefined(key);
  if (object.is_dict()) {
    if (const Value* v = object.as_dict().find(key)) return *v;
  } else if (object.is_namespace() && key.is_string()) {
    if (const Value* v = object.as_namespace().find(key.as_string())) return *v;
  } else if (object.is_list() && integral(key)) {
    const auto& items = object.as_list().items;
    if (auto i = normalize_index(as_integral(key), items.size())) return items[*i];
    return Value::undefined(type_name(object) + " object has no element " + std::to_string(as_integral(key)));
  } else if (object.is_string() && integral(key)) {
    const std::vector<char32_t> cps = decode_utf8(object.as_string());
    if (auto i = normalize_index(as_integral(key), cps.size())) return encode_utf8(cps, *i, *i + 1);
    return Value::undefined("str object has no element " + std::to_string(as_integral(key)));
  }
  if (key.is_string()) {
    if (std::optional<Value> method = find_method(object, key.as_string())) return *method;
    return Value::undefined(no_attribute(object, key.as_string()));
  }
  return Value::undefined(type_name(object) + " object has no element " + repr(key));
}

Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) fail_undefined(object);
  auto bound = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (!integral(v)) fail("slice indices must be integers or None, not " + type_name(v));
    return as_integral(v);
  };
  std::vector<char32_t> cps;
  size_t length = 0;
  if (object.is_string()) cps = decode_utf8(object.as_string()), length = cps.size();
  else if (object.is_list()) length = object.as_list().items.size();
  else return Value::undefined(quoted_type(object) + "' object is not subscriptable");
  const int64_t n = static_cast<int64_t>(length);
  const int64_t st = bound(step).value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lower, upper);
  };
  const int64_t first = adjust(bound(start), st > 0 ? lower : upper);
  const int64_t last = adjust(bound(stop), st > 0 ? upper : lower);
  std::vector<size_t> picked;
  for (int64_t i = first; st > 0 ? i < last : i > last; i += st) picked.push_back(static_cast<size_t>(i));
  if (object.is_string()) {
    std::string out;
    for (const size_t i : picked) append_utf8(out, cps[i]);
    return out;
  }
  std::vector<Value> items;
  for (const size_t i : picked) items.push_back(object.as_list().items[i]);
  return make_list(std::move(items), object.as_list().tuple);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (item.is_undefined()) fail_undefined(item);
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.as_list().items)
      if (equals(v, item)) return true;
    return false;
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  if (container.is_undefined()) return false;
  fail("argument of type '" + type_name(container) + "' is not iterable");
}

Value call_value(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) fail("'" + type_name(callee) + "' object is not callable");
  return callee.as_function().call(args);
}

Value get_path(const Value& object, const std::string& path) {
  Value current = object;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    const std::string part = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    bool numeric = !part.empty();
    for (const char c : part) numeric = numeric && c >= '0' && c <= '9';
    Value key = numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part);
    current = current.is_undefined() ? current : get_item(current, key);
    if (dot == std::string::npos) return current;
    begin = dot + 1;
  }
}

std::vector<std::optional<Value>> bind_arguments(const CallArgs& args, std::string_view function,
                                                 std::initializer_list<std::string_view> names) {
  std::vector<std::optional<Value>> bound(names.size());
  if (args.positional.size() > names.size())
    fail(std::string(function) + "() takes at most " + std::to_string(names.size()) + " argument(s), " +
         std::to_string(args.positional.size()) + " given");
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (const std::string_view n : names) {
      if (n == name) break;
      ++i;
    }
    if (i == names.size())
      fail(std::string(function) + "() got an unexpected keyword argument '" + name + "'");
    if (bound[i]) fail(std::string(function) + "() got multiple values for argument '" + name + "'");
    bound[i] = value;
  }
  return bound;
}

}  // namespace veloxquant::chat_template
