// jinja2's tests (`x is defined`, `x is string`, `x is equalto 3`, ...), with Python's notion of
// each type: a bool is a number, a dict is a sequence, Undefined is iterable.
#include <map>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/utf8.h"

namespace veloxquant::chat_template {

namespace {

const Value& one_argument(const CallArgs& args, std::string_view test) {
  if (args.positional.size() != 1 || !args.keyword.empty())
    fail("the test '" + std::string(test) + "' takes exactly one argument");
  return args.positional[0];
}

void no_arguments(const CallArgs& args, std::string_view test) {
  if (!args.positional.empty() || !args.keyword.empty())
    fail("the test '" + std::string(test) + "' takes no arguments");
}

TestFn kind_test(std::string_view name, bool (*pred)(const Value&)) {
  return [name, pred](const Value& v, CallArgs& args) {
    no_arguments(args, name);
    return pred(v);
  };
}

TestFn comparison_test(std::string_view name, bool (*pred)(const Value&, const Value&)) {
  return [name, pred](const Value& v, CallArgs& args) { return pred(v, one_argument(args, name)); };
}

bool same_object(const Value& a, const Value& b) {
  if (a.v.index() != b.v.index()) return false;
  if (a.is_list()) return std::get<Value::List>(a.v) == std::get<Value::List>(b.v);
  if (a.is_dict()) return std::get<Value::Dict>(a.v) == std::get<Value::Dict>(b.v);
  if (a.is_float()) return false;  // floats are boxed anew in Python; `is` rarely holds
  return equals(a, b);
}

int64_t integer_of(const Value& v, std::string_view test) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  fail("the test '" + std::string(test) + "' needs an integer, got " + type_name(v));
}

std::map<std::string, TestFn, std::less<>> make_tests() {
  std::map<std::string, TestFn, std::less<>> t;
  t["defined"] = kind_test("defined", [](const Value& v) { return !v.is_undefined(); });
  t["undefined"] = kind_test("undefined", [](const Value& v) { return v.is_undefined(); });
  t["none"] = kind_test("none", [](const Value& v) { return v.is_none(); });
  t["boolean"] = kind_test("boolean", [](const Value& v) { return v.is_bool(); });
  t["true"] = kind_test("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
  t["false"] = kind_test("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
  t["integer"] = kind_test("integer", [](const Value& v) { return v.is_int(); });
  t["float"] = kind_test("float", [](const Value& v) { return v.is_float(); });
  t["number"] = kind_test("number", [](const Value& v) { return v.is_number(); });
  t["string"] = kind_test("string", [](const Value& v) { return v.is_string(); });
  t["mapping"] = kind_test("mapping", [](const Value& v) { return v.is_dict(); });
  t["iterable"] = kind_test("iterable", [](const Value& v) {
    return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  });
  t["sequence"] = kind_test("sequence", [](const Value& v) {
    return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  });
  t["callable"] = kind_test("callable", [](const Value& v) { return v.is_callable(); });
  t["escaped"] = kind_test("escaped", [](const Value&) { return false; });
  t["lower"] = kind_test("lower", [](const Value& v) {
    CallArgs none;
    return truthy(find_method(Value(to_str(v)), "islower")->as_function().call(none));
  });
  t["upper"] = kind_test("upper", [](const Value& v) {
    CallArgs none;
    return truthy(find_method(Value(to_str(v)), "isupper")->as_function().call(none));
  });
  t["odd"] = kind_test("odd", [](const Value& v) { return integer_of(v, "odd") % 2 != 0; });
  t["even"] = kind_test("even", [](const Value& v) { return integer_of(v, "even") % 2 == 0; });
  t["divisibleby"] = [](const Value& v, CallArgs& args) {
    const int64_t d = integer_of(one_argument(args, "divisibleby"), "divisibleby");
    if (d == 0) fail("integer division or modulo by zero");
    return integer_of(v, "divisibleby") % d == 0;
  };
  t["eq"] = t["equalto"] = t["=="] = comparison_test("eq", [](const Value& a, const Value& b) {
    return equals(a, b);
  });
  t["ne"] = t["!="] = comparison_test("ne", [](const Value& a, const Value& b) { return !equals(a, b); });
  t["lt"] = t["lessthan"] = t["<"] = comparison_test("lt", [](const Value& a, const Value& b) {
    return compare(a, b) < 0;
  });
  t["le"] = t["<="] = comparison_test("le",
                                      [](const Value& a, const Value& b) { return compare(a, b) <= 0; });
  t["gt"] = t["greaterthan"] = t[">"] = comparison_test("gt", [](const Value& a, const Value& b) {
    return compare(a, b) > 0;
  });
  t["ge"] = t[">="] = comparison_test("ge",
                                      [](const Value& a, const Value& b) { return compare(a, b) >= 0; });
  t["in"] = comparison_test("in", [](const Value& a, const Value& b) { return contains(b, a); });
  t["sameas"] = comparison_test("sameas", same_object);
  return t;
}

}  // namespace

const TestFn* find_test(std::string_view name) {
  static const auto tests = make_tests();
  const auto it = tests.find(name);
  return it == tests.end() ? nullptr : &it->second;
}

}  // namespace veloxquant::chat_template
