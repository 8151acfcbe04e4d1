// The named things a template can use: filters (x | name), tests (x is name), methods of strings,
// dicts and lists (x.name(...)) and the global functions (range, namespace, raise_exception, ...).
// Filters and tests are looked up when the template is parsed, so an unknown one fails early, as
// in jinja2.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat_template/value.h"

namespace veloxquant::chat_template {

struct Scope;
struct RenderState;

using FilterFn = std::function<Value(const Value& input, CallArgs& args)>;
using TestFn = std::function<bool(const Value& input, CallArgs& args)>;

const FilterFn* find_filter(std::string_view name);  // nullptr when not supported
const TestFn* find_test(std::string_view name);
// `object.name` when name is a method of the object's type: the method bound to the object.
// Fails for methods that exist in Python but are not supported (e.g. list.append, which the
// immutable sandbox forbids too); nullopt when the type has no such method.
std::optional<Value> find_method(const Value& object, const std::string& name);
// range, dict, namespace, raise_exception, strftime_now.
void install_globals(Scope& scope);

// Binds call arguments to parameter names as Python would: positionals first, then keywords;
// fails naming `function` on too many, unknown or repeated arguments. Missing ones are nullopt.
std::vector<std::optional<Value>> bind_arguments(const CallArgs& args, std::string_view function,
                                                 std::initializer_list<std::string_view> names);

// The items a for loop or a filter iterates: list items, dict keys, a string's characters;
// nothing for Undefined. Fails for anything else.
std::vector<Value> iterate(const Value& v);
// Jinja's attribute lookup: methods of the type first, then dict keys / namespace attributes.
Value get_attribute(const Value& object, const std::string& name);
// Jinja's subscript: dict keys and list/string indexes first, then methods.
Value get_item(const Value& object, const Value& key);
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);
bool contains(const Value& container, const Value& item);
Value binary_operation(std::string_view op, const Value& a, const Value& b);
Value call_value(const Value& callee, CallArgs& args);
// A dotted path ("function.name", "0") looked up with get_item, as jinja2's attribute= args do.
Value get_path(const Value& object, const std::string& path);

}  // namespace veloxquant::chat_template
