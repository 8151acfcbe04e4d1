// The functions every template can call: jinja2's range, dict and namespace, and the two that
// transformers adds, raise_exception and strftime_now.
#include <ctime>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/context.h"

namespace veloxquant::chat_template {

namespace {

inline constexpr int64_t kMaxRangeLength = 1'000'000;

Value range_function(CallArgs& args) {
  if (!args.keyword.empty()) fail("range() takes no keyword arguments");
  std::vector<int64_t> bounds;
  for (const Value& v : args.positional) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_int() && !v.is_bool()) fail("range() expects integers, got " + type_name(v));
    bounds.push_back(v.is_int() ? v.as_int() : v.as_bool());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (bounds.size() == 1) stop = bounds[0];
  else if (bounds.size() == 2) start = bounds[0], stop = bounds[1];
  else if (bounds.size() == 3) start = bounds[0], stop = bounds[1], step = bounds[2];
  else fail("range() expects 1 to 3 arguments, got " + std::to_string(bounds.size()));
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRangeLength)
      fail("range() longer than " + std::to_string(kMaxRangeLength) + " items");
    items.emplace_back(i);
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return make_list(std::move(items));
}

// dict(**kwargs) and namespace(mapping?, **kwargs) take their entries the same way.
std::vector<std::pair<Value, Value>> entries_of(CallArgs& args, std::string_view function) {
  std::vector<std::pair<Value, Value>> entries;
  if (args.positional.size() > 1) fail(std::string(function) + "() takes at most one positional argument");
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict())
      fail(std::string(function) + "() expects a mapping, got " + type_name(args.positional[0]));
    entries = args.positional[0].as_dict().items;
  }
  for (auto& [name, value] : args.keyword) entries.emplace_back(Value(name), value);
  return entries;
}

}  // namespace

void install_globals(Scope& scope) {
  scope.set("range", make_function("function 'range'", range_function));
  scope.set("dict", make_function("function 'dict'",
                                  [](CallArgs& args) { return make_dict(entries_of(args, "dict")); }));
  scope.set("namespace", make_function("function 'namespace'", [](CallArgs& args) {
              auto ns = std::make_shared<Namespace>();
              const Value entries = make_dict(entries_of(args, "namespace"));  // repeated keys merged
              for (const auto& [key, value] : entries.as_dict().items) {
                if (!key.is_string()) fail("namespace() keys must be strings");
                ns->attrs.emplace_back(key.as_string(), value);
              }
              return Value(ns);
            }));
  scope.set("raise_exception", make_function("function 'raise_exception'", [](CallArgs& args) -> Value {
              const auto a = bind_arguments(args, "raise_exception", {"message"});
              throw RenderFailure{a[0] ? to_str(*a[0]) : std::string(), 0, true};
            }));
  scope.set("strftime_now", make_function("function 'strftime_now'", [](CallArgs& args) -> Value {
              const auto a = bind_arguments(args, "strftime_now", {"format"});
              if (!a[0] || !a[0]->is_string()) fail("strftime_now() expects a format string");
              const std::time_t now = std::time(nullptr);
              std::tm local{};
              localtime_r(&now, &local);
              char buf[512];
              const size_t n = std::strftime(buf, sizeof buf, a[0]->as_string().c_str(), &local);
              return std::string(buf, n);
            }));
}

}  // namespace veloxquant::chat_template
