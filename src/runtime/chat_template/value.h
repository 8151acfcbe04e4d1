// The values a chat template computes with, modelled on the Python objects jinja2 hands around:
// Undefined, None, bool, int, float, str, list/tuple, dict (insertion-ordered), namespace and
// callables (macros, builtins, bound methods). Containers are shared and immutable once built, as
// in jinja2's immutable sandbox; only a namespace changes after it is made.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace veloxquant::chat_template {

// Thrown while rendering; the statement being executed adds its line before it leaves the
// evaluator (chat_template.cpp turns it into ChatTemplateError).
struct RenderFailure {
  std::string message;
  int line = 0;
  bool raised = false;  // by the template's raise_exception()
};
[[noreturn]] void fail(std::string message);

// The deepest nesting of lists, dicts and tuples a value may have: every recursive walk over a
// value (repr, tojson, equality, destruction) stays within it.
inline constexpr int kMaxValueDepth = 256;
// The longest string any step may build (the output's own limit too).
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
// Fails when a string of `bytes` would exceed kMaxStringBytes; called before building it.
void check_string_size(size_t bytes);

class Value;
struct Undefined {
  std::string hint;  // the error message for using it, e.g. "'tools' is undefined"
};
struct None {};
struct ListData {
  std::vector<Value> items;
  bool tuple = false;  // prints as (a, b); otherwise the same as a list
  int depth = 1;
};
struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, keys unique under ==
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view name);
};
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
struct Function {
  std::string name;  // for messages: "macro 'format'", "method 'split' of str"
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  using List = std::shared_ptr<const ListData>;
  using Dict = std::shared_ptr<const DictData>;
  using Ns = std::shared_ptr<Namespace>;
  using Fn = std::shared_ptr<const Function>;
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, List, Dict, Ns, Fn>;

  Value() : v(Undefined{}) {}
  Value(None n) : v(n) {}
  Value(bool b) : v(b) {}
  Value(int64_t i) : v(i) {}
  Value(int i) : v(static_cast<int64_t>(i)) {}
  Value(double d) : v(d) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(Undefined u) : v(std::move(u)) {}
  Value(Ns ns) : v(std::move(ns)) {}
  Value(Fn fn) : v(std::move(fn)) {}
  // Lists and dicts are built through make_list / make_dict, which check the depth.

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python's numbers.Number
  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_list() const { return std::holds_alternative<List>(v); }
  bool is_dict() const { return std::holds_alternative<Dict>(v); }
  bool is_namespace() const { return std::holds_alternative<Ns>(v); }
  bool is_callable() const { return std::holds_alternative<Fn>(v); }

  bool as_bool() const { return std::get<bool>(v); }
  int64_t as_int() const { return std::get<int64_t>(v); }
  double as_float() const { return std::get<double>(v); }
  const std::string& as_string() const { return std::get<std::string>(v); }
  const ListData& as_list() const { return *std::get<List>(v); }
  const DictData& as_dict() const { return *std::get<Dict>(v); }
  Namespace& as_namespace() const { return *std::get<Ns>(v); }
  const Function& as_function() const { return *std::get<Fn>(v); }
  const Undefined& as_undefined() const { return std::get<Undefined>(v); }

  Storage v;

 private:
  friend Value make_list(std::vector<Value>, bool);
  friend Value make_dict(std::vector<std::pair<Value, Value>>);
  explicit Value(List l) : v(std::move(l)) {}
  explicit Value(Dict d) : v(std::move(d)) {}
};

Value make_list(std::vector<Value> items, bool tuple = false);
// Later duplicates of a key replace the earlier value in place, as in a Python dict literal.
Value make_dict(std::vector<std::pair<Value, Value>> items);
Value make_function(std::string name, std::function<Value(CallArgs&)> call);
int depth_of(const Value& v);

// Raises the undefined value's error (jinja2's UndefinedError).
[[noreturn]] void fail_undefined(const Value& v);

bool truthy(const Value& v);
// Python's type(v).__name__, for messages and for the `tojson` error text.
std::string type_name(const Value& v);
// Python's str(v) (Undefined prints nothing) and repr(v).
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string python_float(double d);  // repr(float): shortest round trip, Python's layout
std::string python_str_repr(std::string_view s);
// Python's ==; ints, floats and bools compare by value.
bool equals(const Value& a, const Value& b);
// Python's <, as -1/0/1; fails for values Python cannot order (e.g. str < int).
int compare(const Value& a, const Value& b);
// The value as a double/int for arithmetic; fails naming `what` if it is not a number.
double number_as_double(const Value& v);

}  // namespace veloxquant::chat_template
