// Evaluating expression nodes.
#include "runtime/chat_template/ast.h"

namespace veloxquant::chat_template {

CallArgs ArgExprs::eval(Frame& frame) const {
  CallArgs args;
  args.positional.reserve(positional.size());
  for (const ExprPtr& e : positional) args.positional.push_back(e->eval(frame));
  for (const auto& [name, e] : keyword) args.keyword.emplace_back(name, e->eval(frame));
  return args;
}

Value Literal::eval(Frame&) const { return value; }

Value NameRef::eval(Frame& frame) const {
  if (const Value* v = frame.scope->lookup(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

Value ListLiteral::eval(Frame& frame) const {
  std::vector<Value> values;
  values.reserve(items.size());
  for (const ExprPtr& e : items) values.push_back(e->eval(frame));
  return make_list(std::move(values), tuple);
}

Value DictLiteral::eval(Frame& frame) const {
  std::vector<std::pair<Value, Value>> values;
  values.reserve(items.size());
  for (const auto& [key, value] : items) {
    Value k = key->eval(frame);
    values.emplace_back(std::move(k), value->eval(frame));
  }
  return make_dict(std::move(values));
}

Value AttributeExpr::eval(Frame& frame) const { return get_attribute(object->eval(frame), name); }

Value SubscriptExpr::eval(Frame& frame) const {
  const Value obj = object->eval(frame);
  return get_item(obj, index->eval(frame));
}

Value SliceExpr::eval(Frame& frame) const {
  const Value obj = object->eval(frame);
  auto part = [&](const ExprPtr& e) { return e ? e->eval(frame) : Value(None{}); };
  const Value a = part(start), b = part(stop), c = part(step);
  return slice_value(obj, a, b, c);
}

Value CallExpr::eval(Frame& frame) const {
  const Value fn = callee->eval(frame);
  CallArgs call_args = args.eval(frame);
  return call_value(fn, call_args);
}

Value FilterExpr::apply(Frame& frame, const Value& input_value) const {
  CallArgs call_args = args.eval(frame);
  return (*filter)(input_value, call_args);
}

Value FilterExpr::eval(Frame& frame) const { return apply(frame, input->eval(frame)); }

Value TestExpr::eval(Frame& frame) const {
  const Value subject = input->eval(frame);
  CallArgs call_args = args.eval(frame);
  return (*test)(subject, call_args) != negated;
}

Value UnaryExpr::eval(Frame& frame) const {
  const Value v = operand->eval(frame);
  if (op == Op::Not) return !truthy(v);
  if (v.is_undefined()) fail_undefined(v);
  const char* symbol = op == Op::Negate ? "-" : "+";
  if (v.is_int() || v.is_bool()) {
    const int64_t i = v.is_int() ? v.as_int() : v.as_bool();
    if (op == Op::Plus) return i;
    if (i == INT64_MIN) fail("integer overflow in unary -");
    return -i;
  }
  if (v.is_float()) return op == Op::Negate ? -v.as_float() : v.as_float();
  fail(std::string("bad operand type for unary ") + symbol + ": '" + type_name(v) + "'");
}

Value BinaryExpr::eval(Frame& frame) const {
  Value l = left->eval(frame);
  if (op == "and") return truthy(l) ? right->eval(frame) : l;
  if (op == "or") return truthy(l) ? l : right->eval(frame);
  const Value r = right->eval(frame);
  Value result = binary_operation(op, l, r);
  if (result.is_string()) frame.state.count_concatenation(result.as_string().size());
  else if (result.is_list()) frame.state.count_concatenation(result.as_list().items.size());
  return result;
}

namespace {

bool compare_values(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  const int c = compare(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

}  // namespace

Value CompareExpr::eval(Frame& frame) const {
  Value left_value = first->eval(frame);
  for (const auto& [op, expr] : rest) {
    Value right_value = expr->eval(frame);
    if (!compare_values(op, left_value, right_value)) return false;
    left_value = std::move(right_value);
  }
  return true;
}

Value ConditionalExpr::eval(Frame& frame) const {
  if (truthy(cond->eval(frame))) return then->eval(frame);
  if (otherwise) return otherwise->eval(frame);
  return Value::undefined("the inline if-expression on line " + std::to_string(line) +
                          " evaluated to false and no else section was defined");
}

}  // namespace veloxquant::chat_template
