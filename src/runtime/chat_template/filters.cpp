// jinja2's built-in filters that chat templates use, plus transformers' `tojson` (json.dumps
// with ensure_ascii=False and key order kept). Each follows jinja2's own definition, including
// what it does with Undefined.
#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/json_value.h"
#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

std::string soft_str(const Value& v) { return to_str(v); }

std::optional<std::string> optional_string(const std::optional<Value>& v, std::string_view what) {
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) fail(std::string(what) + " must be a string, got " + type_name(*v));
  return v->as_string();
}

bool flag(const std::optional<Value>& v, bool fallback) { return v ? truthy(*v) : fallback; }

// jinja2's sort key: strings lowercased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return lower(v.as_string());
  return v;
}

Value attribute_or_self(const Value& item, const std::optional<std::string>& attribute) {
  return attribute ? get_path(item, *attribute) : item;
}

Value filter_length(const Value& v, CallArgs& args) {
  bind_arguments(args, "length", {});
  if (v.is_string()) return static_cast<int64_t>(count_code_points(v.as_string()));
  if (v.is_list()) return static_cast<int64_t>(v.as_list().items.size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().items.size());
  if (v.is_undefined()) return int64_t{0};
  fail("object of type '" + type_name(v) + "' has no len()");
}

// Python's int() of a string: optional sign, digits with single underscores, surrounding spaces.
std::optional<int64_t> parse_python_int(const std::string& text) {
  const std::string s = strip(text, nullptr, StripSide::Both);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i >= s.size()) return std::nullopt;
  int64_t value = 0;
  bool last_digit = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && last_digit && i + 1 < s.size() && s[i + 1] != '_') {
      last_digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, s[i] - '0', &value))
      return std::nullopt;
    last_digit = true;
  }
  if (!last_digit) return std::nullopt;
  return negative ? -value : value;
}

std::optional<double> parse_python_float(const std::string& text) {
  std::string s = strip(text, nullptr, StripSide::Both);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  const std::string l = lower(s);
  const std::string body = (l[0] == '+' || l[0] == '-') ? l.substr(1) : l;
  const double sign = l[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * INFINITY;
  if (body == "nan") return NAN;
  for (const char c : body)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '+' || c == '-')) return std::nullopt;
  size_t used = 0;
  try {
    const double d = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return d;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Value filter_int(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "int", {"default", "base"});
  const Value fallback = a[0].value_or(Value(int64_t{0}));
  if (a[1] && !(a[1]->is_int() && a[1]->as_int() == 10)) fail("the int filter supports base 10 only");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return v;
  if (v.is_bool()) return int64_t{v.as_bool() ? 1 : 0};
  if (v.is_float()) {
    if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return fallback;
    return static_cast<int64_t>(std::trunc(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = parse_python_int(v.as_string())) return *i;
    if (auto d = parse_python_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18)
      return static_cast<int64_t>(std::trunc(*d));
  }
  return fallback;
}

Value filter_float(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "float", {"default"});
  const Value fallback = a[0].value_or(Value(0.0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return number_as_double(v);
  if (v.is_string())
    if (auto d = parse_python_float(v.as_string())) return *d;
  return fallback;
}

Value filter_tojson(const Value& v, CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  const auto a = bind_arguments(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = flag(a[0], false);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) style.indent = a[1]->as_string();
    else if (a[1]->is_int())
      style.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, a[1]->as_int())), ' ');
    else fail("tojson indent must be an integer or a string, got " + type_name(*a[1]));
    style.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_list() || a[2]->as_list().items.size() != 2 || !a[2]->as_list().items[0].is_string() ||
        !a[2]->as_list().items[1].is_string())
      fail("tojson separators must be a pair of strings");
    style.item_separator = a[2]->as_list().items[0].as_string();
    style.key_separator = a[2]->as_list().items[1].as_string();
  }
  style.sort_keys = flag(a[3], false);
  return to_json(v, style);
}

Value filter_join(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "join", {"d", "attribute"});
  const std::string sep = a[0] ? soft_str(*a[0]) : "";
  const std::optional<std::string> attribute = optional_string(a[1], "join attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(attribute_or_self(item, attribute));
    check_string_size(out.size());
  }
  return out;
}

Value filter_default(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "default", {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (flag(a[1], false) && !truthy(v));
  return use_default ? a[0].value_or(Value(std::string())) : v;
}

Value filter_items(const Value& v, CallArgs& args) {
  bind_arguments(args, "items", {});
  if (v.is_undefined()) return make_list({});
  if (!v.is_dict()) fail("can only get item pairs from a mapping, got " + type_name(v));
  std::vector<Value> out;
  for (const auto& [key, value] : v.as_dict().items) out.push_back(make_list({key, value}, true));
  return make_list(std::move(out));
}

Value filter_dictsort(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("dictsort expects a mapping, got " + type_name(v));
  const bool case_sensitive = flag(a[0], false);
  const std::string by = a[1] ? soft_str(*a[1]) : "key";
  if (by != "key" && by != "value") fail("dictsort: 'by' must be 'key' or 'value', got '" + by + "'");
  std::vector<std::pair<Value, Value>> entries = v.as_dict().items;
  const size_t pick = by == "key" ? 0 : 1;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    const Value& kx = pick == 0 ? x.first : x.second;
    const Value& ky = pick == 0 ? y.first : y.second;
    return compare(sort_key(kx, case_sensitive), sort_key(ky, case_sensitive)) < 0;
  });
  if (flag(a[2], false)) std::reverse(entries.begin(), entries.end());
  std::vector<Value> out;
  for (auto& [key, value] : entries) out.push_back(make_list({key, value}, true));
  return make_list(std::move(out));
}

Value filter_sort(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = flag(a[0], false), case_sensitive = flag(a[1], false);
  const std::optional<std::string> attribute = optional_string(a[2], "sort attribute");
  std::vector<Value> items = iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = compare(sort_key(attribute_or_self(x, attribute), case_sensitive),
                          sort_key(attribute_or_self(y, attribute), case_sensitive));
    return reverse ? c > 0 : c < 0;
  });
  return make_list(std::move(items));
}

Value filter_unique(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = flag(a[0], false);
  const std::optional<std::string> attribute = optional_string(a[1], "unique attribute");
  std::vector<Value> seen, out;
  for (const Value& item : iterate(v)) {
    const Value key = sort_key(attribute_or_self(item, attribute), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return make_list(std::move(out));
}

Value filter_min_max(const Value& v, CallArgs& args, bool want_max) {
  const auto a = bind_arguments(args, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool case_sensitive = flag(a[0], false);
  const std::optional<std::string> attribute = optional_string(a[1], "attribute");
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  for (const Value& item : items) {
    const int c = compare(sort_key(attribute_or_self(item, attribute), case_sensitive),
                          sort_key(attribute_or_self(*best, attribute), case_sensitive));
    if (want_max ? c > 0 : c < 0) best = &item;
  }
  return *best;
}

Value filter_sum(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "sum", {"attribute", "start"});
  const std::optional<std::string> attribute = optional_string(a[0], "sum attribute");
  Value total = a[1].value_or(Value(int64_t{0}));
  for (const Value& item : iterate(v))
    total = binary_operation("+", total, attribute_or_self(item, attribute));
  return total;
}

Value filter_round(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "round", {"precision", "method"});
  const int64_t precision = a[0] && a[0]->is_int() ? a[0]->as_int() : 0;
  const std::string method = a[1] ? soft_str(*a[1]) : "common";
  if ((v.is_int() || v.is_bool()) && precision >= 0) return v.is_int() ? v : Value(int64_t{v.as_bool()});
  const double x = number_as_double(v);
  const double scale = std::pow(10.0, static_cast<double>(precision));
  double r;
  if (method == "common") r = std::nearbyint(x * scale) / scale;  // Python's round(): half to even
  else if (method == "ceil") r = std::ceil(x * scale) / scale;
  else if (method == "floor") r = std::floor(x * scale) / scale;
  else fail("round: method must be 'common', 'ceil' or 'floor', got '" + method + "'");
  return r;
}

Value filter_indent(const Value& v, CallArgs& args) {
  const auto a = bind_arguments(args, "indent", {"width", "first", "blank"});
  std::string indention(4, ' ');
  if (a[0] && a[0]->is_string()) indention = a[0]->as_string();
  else if (a[0] && a[0]->is_int())
    indention = std::string(static_cast<size_t>(std::max<int64_t>(0, a[0]->as_int())), ' ');
  CallArgs no_args;
  const Value lines_value = find_method(Value(soft_str(v) + "\n"), "splitlines")->as_function().call(no_args);
  const auto& lines = lines_value.as_list().items;
  std::string out;
  check_string_size(soft_str(v).size() + (lines.size() + 1) * indention.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) {
      out += "\n";
      if (flag(a[2], false) || !line.empty()) out += indention;
    }
    out += line;
  }
  if (flag(a[1], false)) out = indention + out;
  return out;
}

Value filter_reverse(const Value& v, CallArgs& args) {
  bind_arguments(args, "reverse", {});
  if (v.is_string()) {
    const std::vector<char32_t> cps = decode_utf8(v.as_string());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) append_utf8(out, *it);
    return out;
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return make_list(std::move(items));
}

Value filter_title(const Value& v, CallArgs& args) {
  bind_arguments(args, "title", {});
  // jinja2: words begin after runs of whitespace, '-', '(', '{', '[' or '<'; each word is its
  // first character upper-cased and the rest lower-cased.
  std::string out;
  bool word_start = true;
  for (const char32_t cp : decode_utf8(soft_str(v))) {
    const bool separator = is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' ||
                           cp == '<';
    if (separator) append_utf8(out, cp);
    else append_utf8(out, word_start ? to_upper(cp) : to_lower(cp));
    word_start = separator;
  }
  return out;
}

Value filter_escape(const Value& v, CallArgs& args) {
  bind_arguments(args, "escape", {});
  std::string out;
  for (const char c : soft_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// map / select / reject and their *attr forms share the calling conventions below.
Value filter_map(const Value& v, CallArgs& args) {
  std::vector<Value> out;
  std::optional<Value> attribute, fallback;
  for (const auto& [name, value] : args.keyword) {
    if (name == "attribute") attribute = value;
    else if (name == "default") fallback = value;
    else if (args.positional.empty()) fail("map() got an unexpected keyword argument '" + name + "'");
  }
  if (attribute) {
    if (!args.positional.empty()) fail("map() takes either attribute= or a filter name, not both");
    const std::string path = soft_str(*attribute);
    for (const Value& item : iterate(v)) {
      Value picked = get_path(item, path);
      if (picked.is_undefined() && fallback) picked = *fallback;
      out.push_back(picked);
    }
    return make_list(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string())
    fail("map() needs a filter name or attribute=");
  const std::string name = args.positional[0].as_string();
  const FilterFn* filter = find_filter(name);
  if (!filter) fail("map(): no filter named '" + name + "'");
  for (const Value& item : iterate(v)) {
    CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
    out.push_back((*filter)(item, rest));
  }
  return make_list(std::move(out));
}

Value select_items(const Value& v, CallArgs& args, bool by_attribute, bool keep_if) {
  std::vector<Value> positional = args.positional;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (positional.empty() || !positional[0].is_string())
      fail("selectattr/rejectattr need an attribute name");
    attribute = positional[0].as_string();
    positional.erase(positional.begin());
  }
  const TestFn* test = nullptr;
  if (!positional.empty()) {
    if (!positional[0].is_string()) fail("select/reject: the test name must be a string");
    test = find_test(positional[0].as_string());
    if (!test) fail("no test named '" + positional[0].as_string() + "'");
    positional.erase(positional.begin());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value subject = attribute_or_self(item, attribute);
    CallArgs test_args{positional, args.keyword};
    const bool passed = test ? (*test)(subject, test_args) : truthy(subject);
    if (passed == keep_if) out.push_back(item);
  }
  return make_list(std::move(out));
}

std::map<std::string, FilterFn, std::less<>> make_filters() {
  std::map<std::string, FilterFn, std::less<>> f;
  f["length"] = f["count"] = filter_length;
  f["trim"] = [](const Value& v, CallArgs& args) -> Value {
    const auto a = bind_arguments(args, "trim", {"chars"});
    const std::optional<std::string> chars = optional_string(a[0], "trim chars");
    return strip(soft_str(v), chars ? &*chars : nullptr, StripSide::Both);
  };
  f["upper"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "upper", {});
    return upper(soft_str(v));
  };
  f["lower"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "lower", {});
    return lower(soft_str(v));
  };
  f["capitalize"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "capitalize", {});
    CallArgs none;
    return find_method(Value(soft_str(v)), "capitalize")->as_function().call(none);
  };
  f["title"] = filter_title;
  f["string"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "string", {});
    return soft_str(v);
  };
  f["safe"] = f["string"];
  f["escape"] = f["e"] = filter_escape;
  f["int"] = filter_int;
  f["float"] = filter_float;
  f["tojson"] = filter_tojson;
  f["join"] = filter_join;
  f["default"] = f["d"] = filter_default;
  f["first"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "first", {});
    const std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  };
  f["last"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "last", {});
    const std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  };
  f["replace"] = [](const Value& v, CallArgs& args) -> Value {
    return find_method(Value(soft_str(v)), "replace")->as_function().call(args);
  };
  f["items"] = filter_items;
  f["dictsort"] = filter_dictsort;
  f["list"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "list", {});
    return make_list(iterate(v));
  };
  f["sort"] = filter_sort;
  f["unique"] = filter_unique;
  f["reverse"] = filter_reverse;
  f["min"] = [](const Value& v, CallArgs& args) { return filter_min_max(v, args, false); };
  f["max"] = [](const Value& v, CallArgs& args) { return filter_min_max(v, args, true); };
  f["sum"] = filter_sum;
  f["abs"] = [](const Value& v, CallArgs& args) -> Value {
    bind_arguments(args, "abs", {});
    if (v.is_int()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow in abs");
      return v.as_int() < 0 ? -v.as_int() : v.as_int();
    }
    if (v.is_bool()) return int64_t{v.as_bool()};
    return std::fabs(number_as_double(v));
  };
  f["round"] = filter_round;
  f["indent"] = filter_indent;
  f["map"] = filter_map;
  f["select"] = [](const Value& v, CallArgs& args) { return select_items(v, args, false, true); };
  f["reject"] = [](const Value& v, CallArgs& args) { return select_items(v, args, false, false); };
  f["selectattr"] = [](const Value& v, CallArgs& args) { return select_items(v, args, true, true); };
  f["rejectattr"] = [](const Value& v, CallArgs& args) { return select_items(v, args, true, false); };
  return f;
}

}  // namespace

const FilterFn* find_filter(std::string_view name) {
  static const auto filters = make_filters();
  const auto it = filters.find(name);
  return it == filters.end() ? nullptr : &it->second;
}

}  // namespace veloxquant::chat_template
