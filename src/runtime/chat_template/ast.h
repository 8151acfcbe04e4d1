// The parsed template: expression and statement nodes, each evaluating itself (expressions.cpp,
// statements.cpp). A node is immutable after parsing, so one template renders on many threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/chat_template/builtins.h"
#include "runtime/chat_template/context.h"
#include "runtime/chat_template/value.h"

namespace veloxquant::chat_template {

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Frame& frame) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ArgExprs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  CallArgs eval(Frame& frame) const;
};

struct Literal : Expr {
  Value value;
  Value eval(Frame& frame) const override;
};
struct NameRef : Expr {
  std::string name;
  Value eval(Frame& frame) const override;
};
struct ListLiteral : Expr {
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value eval(Frame& frame) const override;
};
struct DictLiteral : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Frame& frame) const override;
};
struct AttributeExpr : Expr {  // a.b
  ExprPtr object;
  std::string name;
  Value eval(Frame& frame) const override;
};
struct SubscriptExpr : Expr {  // a[b]
  ExprPtr object, index;
  Value eval(Frame& frame) const override;
};
struct SliceExpr : Expr {  // a[start:stop:step], each part optional
  ExprPtr object, start, stop, step;
  Value eval(Frame& frame) const override;
};
struct CallExpr : Expr {
  ExprPtr callee;
  ArgExprs args;
  Value eval(Frame& frame) const override;
};
struct FilterExpr : Expr {  // input | name(args); input is null inside {% filter %} blocks
  ExprPtr input;
  std::string name;
  const FilterFn* filter = nullptr;
  ArgExprs args;
  Value eval(Frame& frame) const override;
  Value apply(Frame& frame, const Value& input_value) const;
};
struct TestExpr : Expr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  const TestFn* test = nullptr;
  ArgExprs args;
  bool negated = false;
  Value eval(Frame& frame) const override;
};
struct UnaryExpr : Expr {
  enum class Op { Negate, Plus, Not } op;
  ExprPtr operand;
  Value eval(Frame& frame) const override;
};
struct BinaryExpr : Expr {  // arithmetic, ~, and, or
  std::string op;
  ExprPtr left, right;
  Value eval(Frame& frame) const override;
};
struct CompareExpr : Expr {  // a == b < c in d ... chained as in Python
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
  Value eval(Frame& frame) const override;
};
struct ConditionalExpr : Expr {  // then if cond else otherwise (otherwise optional)
  ExprPtr then, cond, otherwise;
  Value eval(Frame& frame) const override;
};

// ---- statements ---------------------------------------------------------------------------------

enum class Flow { Normal, Break, Continue };

struct Stmt {
  int line = 0;
  virtual ~Stmt() = default;
  // Runs the statement, adding this line to an error that has none yet.
  Flow exec(Frame& frame) const;

 protected:
  virtual Flow run(Frame& frame) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
Flow exec_body(const Body& body, Frame& frame);

// What a `set` or `for` assigns to: one name, several (tuple unpacking), or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  std::string namespace_attr;  // set ns.attr = ...: names[0] is the namespace
  void assign(Frame& frame, const Value& value) const;
};

struct TextStmt : Stmt {
  std::string text;
  Flow run(Frame& frame) const override;
};
struct OutputStmt : Stmt {
  ExprPtr expr;
  Flow run(Frame& frame) const override;
};
struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
  Flow run(Frame& frame) const override;
};
struct ForStmt : Stmt {
  Target target;
  ExprPtr iterable, condition;
  Body body, otherwise;
  Flow run(Frame& frame) const override;
};
struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  Flow run(Frame& frame) const override;
};
struct SetBlockStmt : Stmt {  // {% set x | filters %}body{% endset %}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  Flow run(Frame& frame) const override;
};
struct MacroStmt : Stmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
  Flow run(Frame& frame) const override;
  // The callable that runs this macro with `closure` as its parent scope.
  Value make_callable(Frame& frame, Scope* closure) const;
};
struct CallBlockStmt : Stmt {  // {% call(params) macro(args) %}body{% endcall %}
  std::unique_ptr<MacroStmt> caller;
  std::unique_ptr<CallExpr> call;
  Flow run(Frame& frame) const override;
};
struct FilterBlockStmt : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  Flow run(Frame& frame) const override;
};
struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
  Flow run(Frame& frame) const override;
};
struct LoopControlStmt : Stmt {
  bool is_break = false;
  Flow run(Frame& frame) const override;
};
struct GenerationStmt : Stmt {  // transformers' {% generation %}: renders its body unchanged
  Body body;
  Flow run(Frame& frame) const override;
};

}  // namespace veloxquant::chat_template
