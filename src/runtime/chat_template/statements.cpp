// Executing statement nodes: output, control flow, assignment, macros.
#include "runtime/chat_template/ast.h"

namespace veloxquant::chat_template {

namespace {

// Frees the scopes created since `mark` when no macro captured one of them, so that long loops
// and many macro calls do not grow the arena.
void release_scopes(RenderState& state, size_t mark) {
  for (size_t i = mark; i < state.scopes.size(); ++i)
    if (state.scopes[i].captured) return;
  state.scopes.resize(mark);
}

// A namespace stored inside a namespace could form a reference cycle; chat templates never need it.
bool holds_namespace(const Value& v) {
  if (v.is_namespace()) return true;
  if (v.is_list())
    for (const Value& item : v.as_list().items)
      if (holds_namespace(item)) return true;
  if (v.is_dict())
    for (const auto& [key, value] : v.as_dict().items)
      if (holds_namespace(value)) return true;
  return false;
}

std::string render_body(const Body& body, Frame& frame, Scope* scope) {
  std::string out;
  Frame inner{frame.state, scope, out};
  exec_body(body, inner);
  return out;
}

}  // namespace

Flow Stmt::exec(Frame& frame) const {
  try {
    return run(frame);
  } catch (RenderFailure& failure) {
    if (failure.line == 0) failure.line = line;
    throw;
  }
}

Flow exec_body(const Body& body, Frame& frame) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = stmt->exec(frame);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

void Target::assign(Frame& frame, const Value& value) const {
  if (!namespace_attr.empty()) {
    const Value* ns = frame.scope->lookup(names[0]);
    if (!ns || !ns->is_namespace())
      fail("cannot assign attribute '" + namespace_attr + "' on non-namespace object '" + names[0] + "'");
    if (holds_namespace(value)) fail("storing a namespace inside a namespace is not supported");
    if (Value* existing = ns->as_namespace().find(namespace_attr)) *existing = value;
    else ns->as_namespace().attrs.emplace_back(namespace_attr, value);
    return;
  }
  if (!unpack) {
    frame.scope->set(names[0], value);
    return;
  }
  const std::vector<Value> items = iterate(value);
  if (items.size() != names.size())
    fail(items.size() > names.size()
             ? "too many values to unpack (expected " + std::to_string(names.size()) + ")"
             : "not enough values to unpack (expected " + std::to_string(names.size()) + ", got " +
                   std::to_string(items.size()) + ")");
  for (size_t i = 0; i < names.size(); ++i) frame.scope->set(names[i], items[i]);
}

Flow TextStmt::run(Frame& frame) const {
  frame.write(text);
  return Flow::Normal;
}

Flow OutputStmt::run(Frame& frame) const {
  frame.write(to_str(expr->eval(frame)));
  return Flow::Normal;
}

Flow IfStmt::run(Frame& frame) const {
  for (const auto& [cond, body] : branches)
    if (truthy(cond->eval(frame))) return exec_body(body, frame);
  return exec_body(otherwise, frame);
}

namespace {

Value loop_object(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto index = static_cast<int64_t>(i);
  std::vector<std::pair<Value, Value>> fields = {
      {"index", index + 1},   {"index0", index},        {"revindex", n - index}, {"revindex0", n - index - 1},
      {"first", index == 0},  {"last", index == n - 1}, {"length", n},           {"depth", int64_t{1}},
      {"depth0", int64_t{0}},
  };
  if (i > 0) fields.emplace_back("previtem", items[i - 1]);
  if (i + 1 < items.size()) fields.emplace_back("nextitem", items[i + 1]);
  fields.emplace_back("cycle", make_function("method 'loop.cycle'", [index](CallArgs& args) -> Value {
                        if (args.positional.empty()) fail("loop.cycle() needs at least one value");
                        return args.positional[static_cast<size_t>(index) % args.positional.size()];
                      }));
  return make_dict(std::move(fields));
}

}  // namespace

Flow ForStmt::run(Frame& frame) const {
  RenderState& state = frame.state;
  std::vector<Value> items = iterate(iterable->eval(frame));
  if (condition) {
    std::vector<Value> kept;
    for (Value& item : items) {
      state.count_iteration();
      const size_t mark = state.scopes.size();
      Frame inner{state, state.new_scope(frame.scope), frame.out};
      target.assign(inner, item);
      const bool keep = truthy(condition->eval(inner));
      release_scopes(state, mark);
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    const size_t mark = state.scopes.size();
    Frame inner{state, state.new_scope(frame.scope), frame.out};
    exec_body(otherwise, inner);
    release_scopes(state, mark);
    return Flow::Normal;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    state.count_iteration();
    const size_t mark = state.scopes.size();
    Frame inner{state, state.new_scope(frame.scope), frame.out};
    target.assign(inner, items[i]);
    inner.scope->set("loop", loop_object(items, i));
    const Flow flow = exec_body(body, inner);
    release_scopes(state, mark);
    if (flow == Flow::Break) break;
  }
  return Flow::Normal;
}

Flow SetStmt::run(Frame& frame) const {
  target.assign(frame, value->eval(frame));
  return Flow::Normal;
}

Flow SetBlockStmt::run(Frame& frame) const {
  Value result = render_body(body, frame, frame.scope);
  for (const auto& filter : filters) result = filter->apply(frame, result);
  target.assign(frame, result);
  return Flow::Normal;
}

Value MacroStmt::make_callable(Frame& frame, Scope* closure) const {
  RenderState* state = &frame.state;
  closure->captured = true;
  return make_function("macro '" + name + "'", [this, state, closure](CallArgs& args) -> Value {
    if (state->call_depth >= kMaxCallDepth)
      fail("macro calls nested deeper than " + std::to_string(kMaxCallDepth) + " (runaway recursion?)");
    struct DepthGuard {
      int& depth;
      ~DepthGuard() { --depth; }
    } guard{++state->call_depth};
    const size_t mark = state->scopes.size();
    Scope* scope = state->new_scope(closure);
    std::string out;
    Frame call_frame{*state, scope, out};
    std::vector<Value> extra_positional;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) scope->set(params[i].first, args.positional[i]);
      else extra_positional.push_back(args.positional[i]);
    }
    if (!extra_positional.empty() && !uses_varargs)
      fail("macro '" + name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    std::vector<std::pair<Value, Value>> extra_keyword;
    for (const auto& [key, value] : args.keyword) {
      size_t i = 0;
      while (i < params.size() && params[i].first != key) ++i;
      if (i < params.size()) {
        if (i < args.positional.size())
          fail("macro '" + name + "' got multiple values for argument '" + key + "'");
        scope->set(key, value);
      } else if (key == "caller") {
        scope->set("caller", value);
      } else if (uses_kwargs) {
        extra_keyword.emplace_back(Value(key), value);
      } else {
        fail("macro '" + name + "' takes no keyword argument '" + key + "'");
      }
    }
    for (const auto& [param, fallback] : params) {
      bool given = false;
      for (const auto& [key, value] : scope->vars) given = given || key == param;
      if (given) continue;
      scope->set(param, fallback ? fallback->eval(call_frame)
                                 : Value::undefined("parameter '" + param + "' was not provided"));
    }
    scope->set("varargs", make_list(std::move(extra_positional), true));
    scope->set("kwargs", make_dict(std::move(extra_keyword)));
    exec_body(body, call_frame);
    release_scopes(*state, mark);
    return out;
  });
}

Flow MacroStmt::run(Frame& frame) const {
  frame.scope->set(name, make_callable(frame, frame.scope));
  return Flow::Normal;
}

Flow CallBlockStmt::run(Frame& frame) const {
  const Value fn = call->callee->eval(frame);
  CallArgs args = call->args.eval(frame);
  args.keyword.emplace_back("caller", caller->make_callable(frame, frame.scope));
  frame.write(to_str(call_value(fn, args)));
  return Flow::Normal;
}

Flow FilterBlockStmt::run(Frame& frame) const {
  Value result = render_body(body, frame, frame.scope);
  for (const auto& filter : filters) result = filter->apply(frame, result);
  frame.write(to_str(result));
  return Flow::Normal;
}

Flow WithStmt::run(Frame& frame) const {
  const size_t mark = frame.state.scopes.size();
  Frame inner{frame.state, frame.state.new_scope(frame.scope), frame.out};
  for (const auto& [target, expr] : assignments) target.assign(inner, expr->eval(frame));
  const Flow flow = exec_body(body, inner);
  release_scopes(frame.state, mark);
  return flow;
}

Flow LoopControlStmt::run(Frame&) const { return is_break ? Flow::Break : Flow::Continue; }

Flow GenerationStmt::run(Frame& frame) const { return exec_body(body, frame); }

}  // namespace veloxquant::chat_template
