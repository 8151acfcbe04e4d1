// Methods of str, dict and list that templates call (x.split(','), d.items(), ...), with Python's
// semantics. Methods that would change a value fail, as in jinja2's immutable sandbox.
#include <algorithm>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

std::string string_arg(const std::optional<Value>& v, std::string_view method, std::string_view param) {
  if (!v || !v->is_string())
    fail("str." + std::string(method) + "() expects a string for '" + std::string(param) + "', got " +
         (v ? type_name(*v) : std::string("nothing")));
  return v->as_string();
}

int64_t int_arg(const std::optional<Value>& v, int64_t fallback, std::string_view method) {
  if (!v || v->is_none()) return fallback;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool();
  fail(std::string(method) + "() expects an integer, got " + type_name(*v));
}

// str.split / str.rsplit: by a separator, or by runs of whitespace when there is none.
Value split_string(const std::string& s, const std::optional<Value>& sep_arg, int64_t maxsplit,
                   bool from_right) {
  std::vector<std::string> parts;
  if (!sep_arg || sep_arg->is_none()) {
    const std::vector<char32_t> cps = decode_utf8(s);
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    for (size_t i = 0; i < cps.size();) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !is_python_space(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // The unsplit remainder keeps all its whitespace, inner and outer, as Python's does.
      if (!from_right) {
        const size_t keep = static_cast<size_t>(maxsplit);
        for (size_t k = 0; k < keep; ++k) parts.push_back(encode_utf8(cps, words[k].first, words[k].second));
        parts.push_back(encode_utf8(cps, words[keep].first, cps.size()));
      } else {
        const size_t first_kept = words.size() - static_cast<size_t>(maxsplit);
        parts.push_back(encode_utf8(cps, 0, words[first_kept - 1].second));
        for (size_t k = first_kept; k < words.size(); ++k)
          parts.push_back(encode_utf8(cps, words[k].first, words[k].second));
      }
    } else {
      for (const auto& [b, e] : words) parts.push_back(encode_utf8(cps, b, e));
    }
  } else {
    const std::string sep = string_arg(sep_arg, from_right ? "rsplit" : "split", "sep");
    if (sep.empty()) fail("empty separator");
    if (!from_right) {
      size_t begin = 0;
      int64_t splits = 0;
      while (maxsplit < 0 || splits < maxsplit) {
        const size_t at = s.find(sep, begin);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(begin, at - begin));
        begin = at + sep.size();
        ++splits;
      }
      parts.push_back(s.substr(begin));
    } else {
      size_t end = s.size();
      int64_t splits = 0;
      std::vector<std::string> reversed;
      while (maxsplit < 0 || splits < maxsplit) {
        if (end < sep.size()) break;
        const size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos) break;
        reversed.push_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
        ++splits;
      }
      reversed.push_back(s.substr(0, end));
      parts.assign(reversed.rbegin(), reversed.rend());
    }
  }
  std::vector<Value> items(parts.begin(), parts.end());
  return make_list(std::move(items));
}

// The prefixes (or suffixes) argument of startswith/endswith: a string or a tuple of strings.
std::vector<std::string> affixes(const std::optional<Value>& v, std::string_view method) {
  if (v && v->is_list()) {
    std::vector<std::string> out;
    for (const Value& item : v->as_list().items) out.push_back(string_arg(item, method, "prefix"));
    return out;
  }
  return {string_arg(v, method, "prefix")};
}

std::string python_replace(const std::string& s, const std::string& old, const std::string& replacement,
                           int64_t count) {
  // Bound the result before building it: replacing "" inserts at every character.
  const size_t slots = old.empty() ? count_code_points(s) + 1 : s.size() / old.size();
  const size_t replacements = count < 0 ? slots : std::min<size_t>(slots, static_cast<size_t>(count));
  if (replacement.size() > old.size())
    check_string_size(s.size() + replacements * (replacement.size() - old.size()));
  std::string out;
  if (old.empty()) {
    const std::vector<char32_t> cps = decode_utf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) out += replacement, ++done;
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    return out;
  }
  size_t begin = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, begin);
    if (at == std::string::npos) break;
    out.append(s, begin, at - begin);
    out += replacement;
    begin = at + old.size();
    ++done;
  }
  out.append(s, begin, std::string::npos);
  return out;
}

bool is_cased(char32_t cp) { return is_cased_upper(cp) || is_cased_lower(cp); }

std::string python_title(const std::string& s) {
  std::string out;
  bool previous_cased = false;
  for (const char32_t cp : decode_utf8(s)) {
    if (is_cased(cp)) {
      if (previous_cased) append_utf8(out, to_lower(cp));
      else append_utf8(out, to_upper(cp));
      previous_cased = true;
    } else {
      append_utf8(out, cp);
      previous_cased = false;
    }
  }
  return out;
}

// Code point index of `needle` in `s` at or after byte `from`, as str.find counts.
int64_t code_point_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(count_code_points(std::string_view(s).substr(0, byte_pos)));
}

template <class Pred>
bool all_code_points(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (const char32_t cp : decode_utf8(s))
    if (!pred(cp)) return false;
  return true;
}

Value string_method(const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "isdigit" ||
      name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" || name == "isupper") {
    bind_arguments(args, fn, {});
    if (name == "upper") return upper(s);
    if (name == "lower") return lower(s);
    if (name == "title") return python_title(s);
    if (name == "capitalize") {
      const std::vector<char32_t> cps = decode_utf8(s);
      if (cps.empty()) return std::string();
      std::string out;
      if (cps[0] == 0xDF) out = "Ss";  // Python title-cases ß as "Ss"
      else append_utf8(out, to_upper(cps[0]));
      return out + lower(encode_utf8(cps, 1, cps.size()));
    }
    if (name == "isdigit") return all_code_points(s, is_digit);
    if (name == "isalpha") return all_code_points(s, is_alpha);
    if (name == "isalnum") return all_code_points(s, [](char32_t c) { return is_alpha(c) || is_digit(c); });
    if (name == "isspace") return all_code_points(s, is_python_space);
    bool any_cased = false, ok = true;
    for (const char32_t cp : decode_utf8(s)) {
      if (is_cased_upper(cp)) any_cased = true, ok = ok && name == "isupper";
      else if (is_cased_lower(cp)) any_cased = true, ok = ok && name == "islower";
    }
    return any_cased && ok;
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind_arguments(args, fn, {"chars"});
    std::optional<std::string> chars;
    if (a[0] && !a[0]->is_none()) chars = string_arg(a[0], name, "chars");
    const StripSide side = name == "strip" ? StripSide::Both
                                           : (name == "lstrip" ? StripSide::Left : StripSide::Right);
    return strip(s, chars ? &*chars : nullptr, side);
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind_arguments(args, fn, {"sep", "maxsplit"});
    return split_string(s, a[0], int_arg(a[1], -1, fn), name == "rsplit");
  }
  if (name == "splitlines") {
    const auto a = bind_arguments(args, fn, {"keepends"});
    const bool keep = a[0] && truthy(*a[0]);
    const std::vector<char32_t> cps = decode_utf8(s);
    std::vector<Value> lines;
    size_t begin = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
      const char32_t c = cps[i];
      const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                       c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!brk) continue;
      size_t end = i + 1;
      if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++end;
      lines.emplace_back(encode_utf8(cps, begin, keep ? end : i));
      begin = end;
      i = end - 1;
    }
    if (begin < cps.size()) lines.emplace_back(encode_utf8(cps, begin, cps.size()));
    return make_list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind_arguments(args, fn, {"prefix"});
    for (const std::string& affix : affixes(a[0], fn)) {
      if (affix.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, affix.size(), affix) == 0
                               : s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
        return true;
    }
    return false;
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind_arguments(args, fn, {"affix"});
    const std::string affix = string_arg(a[0], name, "affix");
    if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0) return s.substr(affix.size());
    if (name == "removesuffix" && !affix.empty() && affix.size() <= s.size() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
      return s.substr(0, s.size() - affix.size());
    return s;
  }
  if (name == "replace") {
    const auto a = bind_arguments(args, fn, {"old", "new", "count"});
    return python_replace(s, string_arg(a[0], name, "old"), string_arg(a[1], name, "new"),
                          int_arg(a[2], -1, fn));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const auto a = bind_arguments(args, fn, {"sub"});
    const std::string sub = string_arg(a[0], name, "sub");
    if (name == "count") {
      if (sub.empty()) return static_cast<int64_t>(count_code_points(s) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return n;
    }
    const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
    return at == std::string::npos ? int64_t{-1} : code_point_index(s, at);
  }
  if (name == "join") {
    const auto a = bind_arguments(args, fn, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& item : iterate(a[0].value_or(Value::undefined("str.join() needs an iterable")))) {
      if (!item.is_string()) fail("str.join() expects strings, found " + type_name(item));
      if (!first) out += s;
      first = false;
      out += item.as_string();
      check_string_size(out.size());
    }
    return out;
  }
  fail("str." + name + "() is not supported");
}

bool is_string_method(const std::string& name) {
  static const char* const kNames[] = {
      "upper", "lower", "title", "capitalize", "isdigit", "isalpha", "isalnum", "isspace", "islower",
      "isupper", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
      "removeprefix", "removesuffix", "replace", "find", "rfind", "count", "join",
      // Python has these too; calling them fails with a clear message.
      "format", "format_map", "encode", "center", "ljust", "rjust", "zfill", "partition", "rpartition",
      "index", "rindex", "expandtabs", "casefold", "swapcase", "translate", "maketrans", "isnumeric",
      "isdecimal", "isidentifier", "isprintable", "istitle", "isascii"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  const DictData& d = self.as_dict();
  const std::string fn = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    bind_arguments(args, fn, {});
    std::vector<Value> out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.push_back(make_list({k, v}, true));
      else out.push_back(name == "keys" ? k : v);
    }
    return make_list(std::move(out));
  }
  if (name == "get") {
    const auto a = bind_arguments(args, fn, {"key", "default"});
    if (!a[0]) fail("dict.get() needs a key");
    if (const Value* v = d.find(*a[0])) return *v;
    return a[1].value_or(Value(None{}));
  }
  if (name == "copy") return self;
  fail("dict." + name + "() is not supported: chat templates cannot change values");
}

Value list_method(const Value& self, const std::string& name, CallArgs& args) {
  const auto& items = self.as_list().items;
  const std::string fn = type_name(self) + "." + name;
  if (name == "count") {
    const auto a = bind_arguments(args, fn, {"value"});
    int64_t n = 0;
    for (const Value& v : items) n += a[0] && equals(v, *a[0]);
    return n;
  }
  if (name == "index") {
    const auto a = bind_arguments(args, fn, {"value"});
    for (size_t i = 0; i < items.size(); ++i)
      if (a[0] && equals(items[i], *a[0])) return static_cast<int64_t>(i);
    fail((a[0] ? repr(*a[0]) : std::string("value")) + " is not in " + type_name(self));
  }
  if (name == "copy") return self;
  fail(fn + "() is not supported: chat templates cannot change values");
}

}  // namespace

std::optional<Value> find_method(const Value& object, const std::string& name) {
  if (object.is_string()) {
    if (!is_string_method(name)) return std::nullopt;
    const std::string& s = object.as_string();
    return make_function("method 'str." + name + "'",
                         [s, name](CallArgs& args) { return string_method(s, name, args); });
  }
  if (object.is_dict()) {
    static const char* const kNames[] = {"items",   "keys",       "values", "get",   "copy",    "pop",
                                         "popitem", "setdefault", "update", "clear", "fromkeys"};
    if (std::none_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; }))
      return std::nullopt;
    return make_function("method 'dict." + name + "'",
                         [object, name](CallArgs& args) { return dict_method(object, name, args); });
  }
  if (object.is_list()) {
    static const char* const kNames[] = {"count", "index",  "copy",    "append", "extend", "insert",
                                         "pop",   "remove", "reverse", "sort",   "clear"};
    if (std::none_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; }))
      return std::nullopt;
    if (object.as_list().tuple && name != "count" && name != "index") return std::nullopt;
    return make_function("method 'list." + name + "'",
                         [object, name](CallArgs& args) { return list_method(object, name, args); });
  }
  return std::nullopt;
}

}  // namespace veloxquant::chat_template
