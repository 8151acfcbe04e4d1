#include "runtime/chat_template/parser.h"

#include <charconv>
#include <initializer_list>

#include "runtime/chat_template/lexer.h"
#include "runtime/chat_template/syntax_error.h"

namespace veloxquant::chat_template {

namespace {

// Deeper nesting of tags or expressions than this is refused, so parsing and evaluation stay
// within a bounded stack.
constexpr int kMaxNesting = 200;

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Text: return "text";
    case TokenKind::VariableBegin: return "'{{'";
    case TokenKind::VariableEnd: return "'}}'";
    case TokenKind::BlockBegin: return "'{%'";
    case TokenKind::BlockEnd: return "'%}'";
    case TokenKind::End: return "end of template";
    case TokenKind::String: return "string";
    default: return "'" + t.text + "'";
  }
}

template <class T>
std::unique_ptr<T> node(int line) {
  auto n = std::make_unique<T>();
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    std::string found;
    Body body = parse_body({}, found);
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Operator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }
  bool skip_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void unexpected(const std::string& expected) const {
    throw_syntax_error(peek().line, "expected " + expected + ", found " + describe(peek()));
  }
  void expect_operator(std::string_view op) {
    if (!skip_operator(op)) unexpected("'" + std::string(op) + "'");
  }
  std::string expect_name(const std::string& what) {
    if (peek().kind != TokenKind::Name) unexpected(what);
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != TokenKind::BlockEnd) unexpected("'%}'");
    next();
  }

  // Guards recursion depth for both statements and expressions.
  struct Nesting {
    Parser& p;
    explicit Nesting(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting)
        throw_syntax_error(p.peek().line, "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Nesting() { --p.nesting_; }
  };

  // ---- statements ----

  // Statements up to one of `end_tags` (whose name is consumed and returned in `found`; the rest
  // of that tag is left to the caller), or to the end of the template when end_tags is empty.
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string& found) {
    Nesting guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::End) {
        if (end_tags.size() == 0) return body;
        std::string names;
        for (const std::string_view tag : end_tags)
          names += (names.empty() ? "'" : " or '") + std::string(tag) + "'";
        throw_syntax_error(t.line, "unexpected end of template; expected " + names);
      }
      if (t.kind == TokenKind::Text) {
        auto text = node<TextStmt>(t.line);
        text->text = next().text;
        body.push_back(std::move(text));
      } else if (t.kind == TokenKind::VariableBegin) {
        next();
        auto out = node<OutputStmt>(t.line);
        out->expr = parse_tuple(true);
        if (peek().kind != TokenKind::VariableEnd) unexpected("'}}'");
        next();
        body.push_back(std::move(out));
      } else if (t.kind == TokenKind::BlockBegin) {
        if (peek(1).kind == TokenKind::Name) {
          for (const std::string_view tag : end_tags) {
            if (peek(1).text == tag) {
              next();
              found = next().text;
              return body;
            }
          }
        }
        body.push_back(parse_statement());
      } else {
        unexpected("text or a tag");
      }
    }
  }

  StmtPtr parse_statement() {
    next();  // {%
    const Token& keyword = peek();
    if (keyword.kind != TokenKind::Name) unexpected("a tag name");
    const std::string name = next().text;
    const int line = keyword.line;
    if (name == "if") return parse_if(line);
    if (name == "for") return parse_for(line);
    if (name == "set") return parse_set(line);
    if (name == "macro") return parse_macro(line);
    if (name == "call") return parse_call_block(line);
    if (name == "filter") return parse_filter_block(line);
    if (name == "with") return parse_with(line);
    if (name == "generation") {
      auto stmt = node<GenerationStmt>(line);
      expect_block_end();
      std::string found;
      stmt->body = parse_body({"endgeneration"}, found);
      expect_block_end();
      return stmt;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) throw_syntax_error(line, "'{% " + name + " %}' outside a for loop");
      auto stmt = node<LoopControlStmt>(line);
      stmt->is_break = name == "break";
      expect_block_end();
      return stmt;
    }
    static const char* const kUnsupported[] = {"extends",    "block", "include", "import",    "from",
                                               "autoescape", "do",    "trans",   "pluralize", "print"};
    for (const char* u : kUnsupported)
      if (name == u)
        throw_syntax_error(line, "'{% " + name + " %}' is not supported by this chat-template engine");
    throw_syntax_error(line, "unknown tag '" + name + "' (or one that closes no open block)");
  }

  StmtPtr parse_if(int line) {
    auto stmt = node<IfStmt>(line);
    std::string found = "elif";
    while (found == "elif") {
      ExprPtr cond = parse_expression();
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"}, found);
      stmt->branches.emplace_back(std::move(cond), std::move(body));
    }
    if (found == "else") {
      expect_block_end();
      stmt->otherwise = parse_body({"endif"}, found);
    }
    expect_block_end();
    return stmt;
  }

  Target parse_target(bool allow_attribute) {
    Target target;
    const bool parenthesized = skip_operator("(");
    target.names.push_back(expect_name("a variable name"));
    if (allow_attribute && !parenthesized && skip_operator(".")) {
      target.namespace_attr = expect_name("an attribute name");
      return target;
    }
    while (skip_operator(",")) {
      target.unpack = true;
      if (peek().kind != TokenKind::Name) break;  // trailing comma
      target.names.push_back(next().text);
    }
    if (parenthesized) expect_operator(")"), target.unpack = true;
    return target;
  }

  StmtPtr parse_for(int line) {
    auto stmt = node<ForStmt>(line);
    stmt->target = parse_target(false);
    if (!skip_name("in")) unexpected("'in'");
    stmt->iterable = parse_tuple(false);
    if (skip_name("if")) stmt->condition = parse_expression();
    if (at_name("recursive")) throw_syntax_error(peek().line, "recursive for loops are not supported");
    expect_block_end();
    std::string found;
    ++loop_depth_;
    stmt->body = parse_body({"else", "endfor"}, found);
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      stmt->otherwise = parse_body({"endfor"}, found);
    }
    expect_block_end();
    return stmt;
  }

  std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain(bool need_one) {
    std::vector<std::unique_ptr<FilterExpr>> filters;
    if (need_one) filters.push_back(parse_filter(nullptr));
    while (skip_operator("|")) filters.push_back(parse_filter(nullptr));
    return filters;
  }

  StmtPtr parse_set(int line) {
    Target target = parse_target(true);
    if (skip_operator("=")) {
      auto stmt = node<SetStmt>(line);
      stmt->target = std::move(target);
      stmt->value = parse_tuple(true);
      expect_block_end();
      return stmt;
    }
    auto stmt = node<SetBlockStmt>(line);
    stmt->target = std::move(target);
    stmt->filters = parse_filter_chain(false);
    expect_block_end();
    std::string found;
    stmt->body = parse_body({"endset"}, found);
    expect_block_end();
    return stmt;
  }

  void parse_params(MacroStmt& macro) {
    expect_operator("(");
    while (!at_operator(")")) {
      if (!macro.params.empty()) expect_operator(",");
      if (at_operator(")")) break;
      std::string param = expect_name("a parameter name");
      ExprPtr fallback;
      if (skip_operator("=")) fallback = parse_expression();
      macro.params.emplace_back(std::move(param), std::move(fallback));
    }
    next();
  }

  Body parse_macro_body(MacroStmt& macro, std::string_view end_tag) {
    macros_.push_back(&macro);
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    std::string found;
    Body body = parse_body({end_tag}, found);
    loop_depth_ = saved_loops;
    macros_.pop_back();
    expect_block_end();
    return body;
  }

  StmtPtr parse_macro(int line) {
    auto stmt = node<MacroStmt>(line);
    stmt->name = expect_name("a macro name");
    parse_params(*stmt);
    expect_block_end();
    stmt->body = parse_macro_body(*stmt, "endmacro");
    return stmt;
  }

  StmtPtr parse_call_block(int line) {
    auto stmt = node<CallBlockStmt>(line);
    stmt->caller = node<MacroStmt>(line);
    stmt->caller->name = "caller";
    if (at_operator("(")) parse_params(*stmt->caller);
    ExprPtr call = parse_expression();
    auto* as_call = dynamic_cast<CallExpr*>(call.get());
    if (!as_call) throw_syntax_error(line, "'{% call %}' expects a macro call");
    stmt->call.reset(as_call);
    (void)call.release();
    expect_block_end();
    stmt->caller->body = parse_macro_body(*stmt->caller, "endcall");
    return stmt;
  }

  StmtPtr parse_filter_block(int line) {
    auto stmt = node<FilterBlockStmt>(line);
    stmt->filters = parse_filter_chain(true);
    expect_block_end();
    std::string found;
    stmt->body = parse_body({"endfilter"}, found);
    expect_block_end();
    return stmt;
  }

  StmtPtr parse_with(int line) {
    auto stmt = node<WithStmt>(line);
    while (peek().kind != TokenKind::BlockEnd) {
      if (!stmt->assignments.empty()) expect_operator(",");
      Target target = parse_target(false);
      expect_operator("=");
      stmt->assignments.emplace_back(std::move(target), parse_expression());
    }
    expect_block_end();
    std::string found;
    stmt->body = parse_body({"endwith"}, found);
    expect_block_end();
    return stmt;
  }

  // ---- expressions ----

  // An expression, or several separated by commas (an implicit tuple), as in {{ a, b }} and
  // `for x in a, b`. The iterable of a for loop takes no `x if c else y` (its `if` filters).
  ExprPtr parse_tuple(bool with_conditional) {
    const int line = peek().line;
    auto parse_one = [&] { return with_conditional ? parse_expression() : parse_or(); };
    ExprPtr first = parse_one();
    if (!at_operator(",")) return first;
    auto tuple = node<ListLiteral>(line);
    tuple->tuple = true;
    tuple->items.push_back(std::move(first));
    while (skip_operator(",")) {
      if (at_tuple_end()) break;
      tuple->items.push_back(parse_one());
    }
    return tuple;
  }

  bool at_tuple_end() const {
    const TokenKind k = peek().kind;
    return k == TokenKind::VariableEnd || k == TokenKind::BlockEnd || at_operator(")") || at_name("if") ||
           at_operator("=");
  }

  ExprPtr parse_expression() {
    Nesting guard(*this);
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const int line = next().line;
      auto cond = node<ConditionalExpr>(line);
      cond->then = std::move(expr);
      cond->cond = parse_or();
      if (skip_name("else")) cond->otherwise = parse_expression();
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto b = node<BinaryExpr>(line);
    b->op = std::move(op);
    b->left = std::move(left);
    b->right = std::move(right);
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nesting guard(*this);
      auto n = node<UnaryExpr>(next().line);
      n->op = UnaryExpr::Op::Not;
      n->operand = parse_not();
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = peek().line;
    ExprPtr first = parse_math1();
    std::vector<std::pair<std::string, ExprPtr>> rest;
    while (true) {
      std::string op;
      const Token& t = peek();
      if (t.kind == TokenKind::Operator && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                            t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next(), next();
        op = "not in";
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    auto c = node<CompareExpr>(line);
    c->first = std::move(first);
    c->rest = std::move(rest);
    return c;
  }

  template <class Next>
  ExprPtr parse_left_assoc(std::initializer_list<std::string_view> ops, Next next_level) {
    ExprPtr left = (this->*next_level)();
    while (true) {
      bool matched = false;
      for (const std::string_view op : ops) {
        if (at_operator(op)) {
          const int line = next().line;
          left = binary(std::string(op), std::move(left), (this->*next_level)(), line);
          matched = true;
          break;
        }
      }
      if (!matched) return left;
    }
  }

  ExprPtr parse_math1() { return parse_left_assoc({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_left_assoc({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_left_assoc({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_left_assoc({"**"}, &Parser::parse_unary_with_filters); }
  ExprPtr parse_unary_with_filters() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    Nesting guard(*this);
    ExprPtr expr;
    if (at_operator("-") || at_operator("+")) {
      auto u = node<UnaryExpr>(peek().line);
      u->op = next().text == "-" ? UnaryExpr::Op::Negate : UnaryExpr::Op::Plus;
      u->operand = parse_unary(false);
      expr = std::move(u);
    } else {
      expr = parse_primary();
    }
    expr = parse_postfix(std::move(expr));
    if (with_filter) expr = parse_filters_and_tests(std::move(expr));
    return expr;
  }

  ExprPtr literal(Value v, int line) {
    auto l = node<Literal>(line);
    l->value = std::move(v);
    return l;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    const int line = t.line;
    switch (t.kind) {
      case TokenKind::Name: {
        const std::string name = next().text;
        if (name == "true" || name == "True") return literal(true, line);
        if (name == "false" || name == "False") return literal(false, line);
        if (name == "none" || name == "None") return literal(Value(None{}), line);
        if (!macros_.empty()) {
          if (name == "varargs") macros_.back()->uses_varargs = true;
          if (name == "kwargs") macros_.back()->uses_kwargs = true;
          if (name == "caller") macros_.back()->uses_caller = true;
        }
        auto ref = node<NameRef>(line);
        ref->name = name;
        return ref;
      }
      case TokenKind::String: {
        std::string s = next().text;
        while (peek().kind == TokenKind::String) s += next().text;  // 'a' 'b' is 'ab'
        return literal(std::move(s), line);
      }
      case TokenKind::Integer: {
        const std::string& digits = next().text;
        int64_t v = 0;
        const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (res.ec != std::errc()) throw_syntax_error(line, "integer literal " + digits + " exceeds 64 bits");
        return literal(v, line);
      }
      case TokenKind::Float: return literal(std::stod(next().text), line);
      case TokenKind::Operator:
        if (t.text == "(") {
          next();
          if (skip_operator(")")) {
            auto empty = node<ListLiteral>(line);
            empty->tuple = true;
            return empty;
          }
          ExprPtr inner = parse_tuple(true);
          expect_operator(")");
          return inner;
        }
        if (t.text == "[") {
          next();
          auto list = node<ListLiteral>(line);
          while (!at_operator("]")) {
            if (!list->items.empty()) expect_operator(",");
            if (at_operator("]")) break;
            list->items.push_back(parse_expression());
          }
          next();
          return list;
        }
        if (t.text == "{") {
          next();
          auto dict = node<DictLiteral>(line);
          while (!at_operator("}")) {
            if (!dict->items.empty()) expect_operator(",");
            if (at_operator("}")) break;
            ExprPtr key = parse_expression();
            expect_operator(":");
            dict->items.emplace_back(std::move(key), parse_expression());
          }
          next();
          return dict;
        }
        break;
      default: break;
    }
    unexpected("an expression");
  }

  ArgExprs parse_call_args() {
    ArgExprs args;
    expect_operator("(");
    bool first = true;
    while (!at_operator(")")) {
      if (!first) expect_operator(",");
      first = false;
      if (at_operator(")")) break;
      if (at_operator("*") || at_operator("**"))
        throw_syntax_error(peek().line, "*args and **kwargs in calls are not supported");
      if (peek().kind == TokenKind::Name && at_operator("=", 1)) {
        std::string key = next().text;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty())
          throw_syntax_error(peek().line, "a positional argument follows a keyword argument");
        args.positional.push_back(parse_expression());
      }
    }
    next();
    return args;
  }

  ExprPtr parse_subscript(ExprPtr object, int line) {
    // After '[': an index, or a slice with up to three optional parts.
    ExprPtr parts[3];
    bool is_slice = false;
    if (!at_operator(":")) parts[0] = parse_expression();
    if (skip_operator(":")) {
      is_slice = true;
      if (!at_operator(":") && !at_operator("]")) parts[1] = parse_expression();
      if (skip_operator(":") && !at_operator("]")) parts[2] = parse_expression();
    }
    expect_operator("]");
    if (!is_slice) {
      auto sub = node<SubscriptExpr>(line);
      sub->object = std::move(object);
      sub->index = std::move(parts[0]);
      return sub;
    }
    auto slice = node<SliceExpr>(line);
    slice->object = std::move(object);
    slice->start = std::move(parts[0]);
    slice->stop = std::move(parts[1]);
    slice->step = std::move(parts[2]);
    return slice;
  }

  ExprPtr parse_postfix(ExprPtr expr) {
    while (true) {
      const int line = peek().line;
      if (skip_operator(".")) {
        if (peek().kind == TokenKind::Integer) {
          auto sub = node<SubscriptExpr>(line);
          sub->object = std::move(expr);
          sub->index = literal(static_cast<int64_t>(std::stoll(next().text)), line);
          expr = std::move(sub);
        } else {
          auto attr = node<AttributeExpr>(line);
          attr->object = std::move(expr);
          attr->name = expect_name("an attribute name");
          expr = std::move(attr);
        }
      } else if (skip_operator("[")) {
        expr = parse_subscript(std::move(expr), line);
      } else if (at_operator("(")) {
        auto call = node<CallExpr>(line);
        call->callee = std::move(expr);
        call->args = parse_call_args();
        expr = std::move(call);
      } else {
        return expr;
      }
    }
  }

  std::string dotted_name(const std::string& what) {
    std::string name = expect_name(what);
    while (at_operator(".") && peek(1).kind == TokenKind::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  std::unique_ptr<FilterExpr> parse_filter(ExprPtr input) {
    auto f = node<FilterExpr>(peek().line);
    f->input = std::move(input);
    f->name = dotted_name("a filter name");
    f->filter = find_filter(f->name);
    if (!f->filter) throw_syntax_error(f->line, "no filter named '" + f->name + "'");
    if (at_operator("(")) f->args = parse_call_args();
    return f;
  }

  ExprPtr parse_filters_and_tests(ExprPtr expr) {
    while (true) {
      if (skip_operator("|")) {
        expr = parse_filter(std::move(expr));
      } else if (at_name("is")) {
        auto t = node<TestExpr>(next().line);
        t->input = std::move(expr);
        t->negated = skip_name("not");
        t->name = dotted_name("a test name");
        t->test = find_test(t->name);
        if (!t->test) throw_syntax_error(t->line, "no test named '" + t->name + "'");
        const Token& a = peek();
        if (at_operator("(")) {
          t->args = parse_call_args();
        } else if ((a.kind == TokenKind::Name || a.kind == TokenKind::String ||
                    a.kind == TokenKind::Integer || a.kind == TokenKind::Float || at_operator("[") ||
                    at_operator("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          t->args.positional.push_back(parse_postfix(parse_primary()));
        }
        expr = std::move(t);
      } else if (at_operator("(")) {
        auto call = node<CallExpr>(peek().line);
        call->callee = std::move(expr);
        call->args = parse_call_args();
        expr = std::move(call);
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroStmt*> macros_;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace veloxquant::chat_template
