#include "tools/serve/template/Parser.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/serve/template/Lexer.h"

namespace kvjit::chat_template {
namespace {

#define KVJIT_TRY(expr)                  \
  do {                                   \
    if (absl::Status _s = (expr); !_s.ok()) return _s; \
  } while (0)

#define KVJIT_TRY_ASSIGN(lhs, expr)          \
  auto KVJIT_CONCAT(_r, __LINE__) = (expr);  \
  if (!KVJIT_CONCAT(_r, __LINE__).ok()) return KVJIT_CONCAT(_r, __LINE__).status(); \
  lhs = std::move(*KVJIT_CONCAT(_r, __LINE__))
#define KVJIT_CONCAT_INNER(a, b) a##b
#define KVJIT_CONCAT(a, b) KVJIT_CONCAT_INNER(a, b)

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->line = line;
  return expr;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseAll() {
    KVJIT_TRY_ASSIGN(Body body, ParseBody({}, ""));
    return body;
  }

 private:
  const Token& Current() const { return tokens_[pos_]; }
  const Token& Peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return Current().kind == TokenKind::kOperator && Current().value == op; }
  bool IsName(const char* name) const { return Current().kind == TokenKind::kName && Current().value == name; }

  absl::Status Fail(const std::string& message) const { return Fail(message, Current().line); }
  absl::Status Fail(const std::string& message, int line) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
  }
  absl::Status Unexpected() const {
    if (Current().kind == TokenKind::kEnd) return Fail("unexpected end of template");
    return Fail(absl::StrCat("unexpected ", DescribeToken(Current())));
  }
  absl::Status ExpectOp(const char* op) {
    if (!IsOp(op)) {
      return Fail(absl::StrCat("expected token '", op, "', got ", DescribeToken(Current())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Current().kind != TokenKind::kBlockEnd) {
      return Fail(absl::StrCat("expected token 'end of statement block', got ", DescribeToken(Current())));
    }
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Current().kind != TokenKind::kName) {
      return Fail(absl::StrCat("expected token 'name', got ", DescribeToken(Current())));
    }
    std::string name = Current().value;
    Next();
    return name;
  }

  static std::string LookingFor(const std::vector<std::string>& end_names, const std::string& innermost) {
    std::vector<std::string> quoted;
    for (const std::string& name : end_names) quoted.push_back("'" + name + "'");
    std::string list;
    for (size_t i = 0; i < quoted.size(); ++i) {
      if (i > 0) list += i + 1 == quoted.size() ? " or " : ", ";
      list += quoted[i];
    }
    return absl::StrCat(" Jinja was looking for the following tags: ", list,
                        ". The innermost block that needs to be closed is '", innermost, "'.");
  }

  // Statements up to `{% name` for a name in end_names (left as the current
  // token) or, where end_names is empty, the end of the template.
  absl::StatusOr<Body> ParseBody(const std::vector<std::string>& end_names, const std::string& innermost) {
    if (++body_depth_ > 100) return Fail("blocks nested too deeply");
    struct Unnest {
      int& n;
      ~Unnest() { --n; }
    } unnest{body_depth_};
    Body body;
    while (true) {
      const Token& token = Current();
      if (token.kind == TokenKind::kEnd) {
        if (end_names.empty()) return body;
        return Fail(absl::StrCat("Unexpected end of template.", LookingFor(end_names, innermost)));
      }
      if (token.kind == TokenKind::kText) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kText;
        stmt->line = token.line;
        stmt->text = token.value;
        body.push_back(std::move(stmt));
        Next();
      } else if (token.kind == TokenKind::kVariableBegin) {
        const int line = token.line;
        Next();
        KVJIT_TRY_ASSIGN(ExprPtr expr, ParseTuple(true));
        if (Current().kind != TokenKind::kVariableEnd) {
          return Fail(absl::StrCat("expected token 'end of print statement', got ", DescribeToken(Current())));
        }
        Next();
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kOutput;
        stmt->line = line;
        stmt->expr = std::move(expr);
        body.push_back(std::move(stmt));
      } else if (token.kind == TokenKind::kBlockBegin) {
        Next();
        if (Current().kind != TokenKind::kName) return Fail("tag name expected");
        const std::string name = Current().value;
        for (const std::string& end : end_names) {
          if (name == end) return body;
        }
        KVJIT_TRY_ASSIGN(StmtPtr stmt, ParseStatement(end_names, innermost));
        body.push_back(std::move(stmt));
      } else {
        return Unexpected();
      }
    }
  }

  absl::StatusOr<StmtPtr> ParseStatement(const std::vector<std::string>& end_names, const std::string& innermost) {
    const std::string name = Current().value;
    const int line = Current().line;
    auto stmt = std::make_unique<Stmt>();
    stmt->line = line;
    if (name == "if") {
      Next();
      stmt->kind = Stmt::Kind::kIf;
      while (true) {
        KVJIT_TRY_ASSIGN(ExprPtr condition, ParseTuple(true));
        KVJIT_TRY(ExpectBlockEnd());
        KVJIT_TRY_ASSIGN(Body body, ParseBody({"elif", "else", "endif"}, "if"));
        stmt->conditions.push_back(std::move(condition));
        stmt->bodies.push_back(std::move(body));
        const std::string end = Current().value;
        Next();
        if (end == "elif") continue;
        if (end == "else") {
          KVJIT_TRY(ExpectBlockEnd());
          KVJIT_TRY_ASSIGN(stmt->else_body, ParseBody({"endif"}, "if"));
          Next();
        }
        KVJIT_TRY(ExpectBlockEnd());
        return stmt;
      }
    }
    if (name == "for") {
      Next();
      stmt->kind = Stmt::Kind::kFor;
      while (true) {
        KVJIT_TRY_ASSIGN(std::string target, ExpectName());
        stmt->targets.push_back(target);
        if (!IsOp(",")) break;
        Next();
      }
      if (!IsName("in")) return Fail(absl::StrCat("expected token 'in', got ", DescribeToken(Current())));
      Next();
      KVJIT_TRY_ASSIGN(stmt->expr, ParseTuple(false));
      if (IsName("if")) {
        Next();
        KVJIT_TRY_ASSIGN(stmt->condition, ParseExpression(true));
      }
      if (IsName("recursive")) return Fail("recursive loops are not supported");
      KVJIT_TRY(ExpectBlockEnd());
      KVJIT_TRY_ASSIGN(Body body, ParseBody({"endfor", "else"}, "for"));
      stmt->bodies.push_back(std::move(body));
      if (IsName("else")) {
        Next();
        KVJIT_TRY(ExpectBlockEnd());
        KVJIT_TRY_ASSIGN(stmt->else_body, ParseBody({"endfor"}, "for"));
      }
      Next();
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    if (name == "set") {
      Next();
      KVJIT_TRY_ASSIGN(std::string target, ExpectName());
      if (IsOp(".")) {
        Next();
        KVJIT_TRY_ASSIGN(stmt->attribute, ExpectName());
        stmt->kind = Stmt::Kind::kSet;
        stmt->targets.push_back(target);
        KVJIT_TRY(ExpectOp("="));
        KVJIT_TRY_ASSIGN(stmt->expr, ParseTuple(true));
        KVJIT_TRY(ExpectBlockEnd());
        return stmt;
      }
      stmt->targets.push_back(target);
      while (IsOp(",")) {
        Next();
        KVJIT_TRY_ASSIGN(std::string more, ExpectName());
        stmt->targets.push_back(more);
      }
      if (IsOp("=")) {
        Next();
        stmt->kind = Stmt::Kind::kSet;
        KVJIT_TRY_ASSIGN(stmt->expr, ParseTuple(true));
        KVJIT_TRY(ExpectBlockEnd());
        return stmt;
      }
      if (stmt->targets.size() != 1) return Fail(absl::StrCat("expected token '=', got ", DescribeToken(Current())));
      stmt->kind = Stmt::Kind::kSetBlock;
      KVJIT_TRY(ParseFilterChain(stmt->filters));
      KVJIT_TRY(ExpectBlockEnd());
      KVJIT_TRY_ASSIGN(Body body, ParseBody({"endset"}, "set"));
      stmt->bodies.push_back(std::move(body));
      Next();
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    if (name == "macro") {
      Next();
      stmt->kind = Stmt::Kind::kMacro;
      KVJIT_TRY_ASSIGN(stmt->text, ExpectName());
      KVJIT_TRY(ExpectOp("("));
      while (!IsOp(")")) {
        if (!stmt->parameters.empty()) KVJIT_TRY(ExpectOp(","));
        if (IsOp(")")) break;
        KVJIT_TRY_ASSIGN(std::string parameter, ExpectName());
        ExprPtr default_value;
        if (IsOp("=")) {
          Next();
          KVJIT_TRY_ASSIGN(default_value, ParseExpression(true));
        }
        stmt->parameters.emplace_back(parameter, std::move(default_value));
      }
      Next();
      KVJIT_TRY(ExpectBlockEnd());
      KVJIT_TRY_ASSIGN(Body body, ParseBody({"endmacro"}, "macro"));
      stmt->bodies.push_back(std::move(body));
      Next();
      if (Current().kind == TokenKind::kName) Next();  // {% endmacro name %}
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    if (name == "break" || name == "continue") {
      if (!InLoop(end_names)) {
        return Fail(absl::StrCat("Encountered unknown tag '", name, "'."));
      }
      Next();
      stmt->kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    if (name == "filter") {
      Next();
      stmt->kind = Stmt::Kind::kFilterBlock;
      // The first filter has no leading '|'.
      KVJIT_TRY_ASSIGN(ExprPtr first, ParseFilter(nullptr));
      stmt->filters.push_back(std::move(first));
      KVJIT_TRY(ParseFilterChain(stmt->filters));
      KVJIT_TRY(ExpectBlockEnd());
      KVJIT_TRY_ASSIGN(Body body, ParseBody({"endfilter"}, "filter"));
      stmt->bodies.push_back(std::move(body));
      Next();
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    if (name == "generation" || name == "with") {
      Next();
      stmt->kind = Stmt::Kind::kScope;
      stmt->text = name;
      if (name == "with") {
        while (Current().kind != TokenKind::kBlockEnd) {
          if (!stmt->parameters.empty()) KVJIT_TRY(ExpectOp(","));
          KVJIT_TRY_ASSIGN(std::string target, ExpectName());
          KVJIT_TRY(ExpectOp("="));
          KVJIT_TRY_ASSIGN(ExprPtr value, ParseExpression(true));
          stmt->parameters.emplace_back(target, std::move(value));
        }
      }
      KVJIT_TRY(ExpectBlockEnd());
      KVJIT_TRY_ASSIGN(Body body, ParseBody({"end" + name}, name));
      stmt->bodies.push_back(std::move(body));
      Next();
      KVJIT_TRY(ExpectBlockEnd());
      return stmt;
    }
    static const std::set<std::string> kUnsupported = {"include", "extends", "import", "from", "block",
                                                       "call", "raw", "do", "autoescape", "trans"};
    if (kUnsupported.count(name) > 0) {
      return Fail(absl::StrCat("the '", name, "' tag is not supported in chat templates"));
    }
    std::string message = absl::StrCat("Encountered unknown tag '", name, "'.");
    if (!end_names.empty()) message += LookingFor(end_names, innermost);
    return Fail(message);
  }

  bool InLoop(const std::vector<std::string>&) const { return loop_depth_ > 0 || true; }

  // `| name(args) | ...` after a set-block target or filter tag.
  absl::Status ParseFilterChain(std::vector<ExprPtr>& filters) {
    while (IsOp("|")) {
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr filter, ParseFilter(nullptr));
      filters.push_back(std::move(filter));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseTuple(bool with_conditional) {
    const int line = Current().line;
    KVJIT_TRY_ASSIGN(ExprPtr first, ParseExpression(with_conditional));
    if (!IsOp(",")) return first;
    ExprPtr tuple = MakeExpr(Expr::Kind::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Current().kind == TokenKind::kVariableEnd || Current().kind == TokenKind::kBlockEnd || IsOp(")") ||
          IsName("if") || IsOp("=")) {
        break;
      }
      KVJIT_TRY_ASSIGN(ExprPtr item, ParseExpression(with_conditional));
      tuple->children.push_back(std::move(item));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_conditional) {
    if (!with_conditional) return ParseOr();
    const int line = Current().line;
    KVJIT_TRY_ASSIGN(ExprPtr expr, ParseOr());
    while (IsName("if")) {
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr condition, ParseOr());
      ExprPtr conditional = MakeExpr(Expr::Kind::kConditional, line);
      conditional->children.push_back(std::move(expr));
      conditional->children.push_back(std::move(condition));
      if (IsName("else")) {
        Next();
        KVJIT_TRY_ASSIGN(ExprPtr otherwise, ParseExpression(true));
        conditional->children.push_back(std::move(otherwise));
      } else {
        conditional->children.push_back(nullptr);
      }
      expr = std::move(conditional);
    }
    return expr;
  }

  ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
    ExprPtr expr = MakeExpr(Expr::Kind::kBinary, line);
    expr->name = op;
    expr->children.push_back(std::move(left));
    expr->children.push_back(std::move(right));
    return expr;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParseAnd());
      left = Binary("or", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParseNot());
      left = Binary("and", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr operand, ParseNot());
      ExprPtr expr = MakeExpr(Expr::Kind::kUnary, line);
      expr->name = "not";
      expr->children.push_back(std::move(operand));
      return expr;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const int line = Current().line;
    KVJIT_TRY_ASSIGN(ExprPtr first, ParseMath1());
    ExprPtr compare;
    while (true) {
      std::string op;
      if (Current().kind == TokenKind::kOperator &&
          (Current().value == "==" || Current().value == "!=" || Current().value == "<" ||
           Current().value == ">" || Current().value == "<=" || Current().value == ">=")) {
        op = Current().value;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().kind == TokenKind::kName && Peek().value == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      KVJIT_TRY_ASSIGN(ExprPtr operand, ParseMath1());
      if (compare == nullptr) {
        compare = MakeExpr(Expr::Kind::kCompare, line);
        compare->children.push_back(std::move(first));
      }
      compare->ops.push_back(op);
      compare->children.push_back(std::move(operand));
    }
    return compare != nullptr ? std::move(compare) : std::move(first);
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Current().value;
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParseConcat());
      left = Binary(op, std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParseMath2());
      left = Binary("~", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Current().value;
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParsePow());
      left = Binary(op, std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    KVJIT_TRY_ASSIGN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Current().line;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr right, ParseUnary(true));
      left = Binary("**", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    if (++nesting_ > 200) return Fail("expression nested too deeply");
    struct Unnest {
      int& n;
      ~Unnest() { --n; }
    } unnest{nesting_};
    ExprPtr expr;
    if (IsOp("-") || IsOp("+")) {
      const int line = Current().line;
      const std::string op = Current().value;
      Next();
      KVJIT_TRY_ASSIGN(ExprPtr operand, ParseUnary(false));
      expr = MakeExpr(Expr::Kind::kUnary, line);
      expr->name = op;
      expr->children.push_back(std::move(operand));
    } else {
      KVJIT_TRY_ASSIGN(expr, ParsePrimary());
    }
    KVJIT_TRY_ASSIGN(expr, ParsePostfix(std::move(expr)));
    if (with_filter) {
      KVJIT_TRY_ASSIGN(expr, ParseFilterExpr(std::move(expr)));
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& token = Current();
    const int line = token.line;
    if (token.kind == TokenKind::kName) {
      ExprPtr expr = MakeExpr(Expr::Kind::kLiteral, line);
      const std::string& name = token.value;
      if (name == "true" || name == "True") expr->literal = Value::Bool(true);
      else if (name == "false" || name == "False") expr->literal = Value::Bool(false);
      else if (name == "none" || name == "None") expr->literal = Value::None();
      else {
        expr->kind = Expr::Kind::kName;
        expr->name = name;
      }
      Next();
      return expr;
    }
    if (token.kind == TokenKind::kString) {
      std::string text = token.value;
      Next();
      while (Current().kind == TokenKind::kString) {
        text += Current().value;
        Next();
      }
      ExprPtr expr = MakeExpr(Expr::Kind::kLiteral, line);
      expr->literal = Value::String(std::move(text));
      return expr;
    }
    if (token.kind == TokenKind::kInteger || token.kind == TokenKind::kFloat) {
      ExprPtr expr = MakeExpr(Expr::Kind::kLiteral, line);
      try {
        expr->literal = token.kind == TokenKind::kInteger ? Value::Int(std::stoll(token.value))
                                                          : Value::Float(std::stod(token.value));
      } catch (...) {
        return Fail(absl::StrCat("number out of range: ", token.value));
      }
      Next();
      return expr;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return MakeExpr(Expr::Kind::kTuple, line);
      }
      KVJIT_TRY_ASSIGN(ExprPtr expr, ParseTuple(true));
      KVJIT_TRY(ExpectOp(")"));
      return expr;
    }
    if (IsOp("[")) {
      Next();
      ExprPtr list = MakeExpr(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        if (!list->children.empty()) KVJIT_TRY(ExpectOp(","));
        if (IsOp("]")) break;
        KVJIT_TRY_ASSIGN(ExprPtr item, ParseExpression(true));
        list->children.push_back(std::move(item));
      }
      Next();
      return list;
    }
    if (IsOp("{")) {
      Next();
      ExprPtr dict = MakeExpr(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        if (!dict->children.empty()) KVJIT_TRY(ExpectOp(","));
        if (IsOp("}")) break;
        KVJIT_TRY_ASSIGN(ExprPtr key, ParseExpression(true));
        KVJIT_TRY(ExpectOp(":"));
        KVJIT_TRY_ASSIGN(ExprPtr value, ParseExpression(true));
        dict->children.push_back(std::move(key));
        dict->children.push_back(std::move(value));
      }
      Next();
      return dict;
    }
    return Unexpected();
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr expr) {
    while (true) {
      const int line = Current().line;
      if (IsOp(".")) {
        Next();
        if (Current().kind == TokenKind::kName) {
          ExprPtr attribute = MakeExpr(Expr::Kind::kAttribute, line);
          attribute->name = Current().value;
          attribute->children.push_back(std::move(expr));
          expr = std::move(attribute);
          Next();
        } else if (Current().kind == TokenKind::kInteger) {
          ExprPtr item = MakeExpr(Expr::Kind::kItem, line);
          ExprPtr index = MakeExpr(Expr::Kind::kLiteral, line);
          index->literal = Value::Int(std::stoll(Current().value));
          item->children.push_back(std::move(expr));
          item->children.push_back(std::move(index));
          expr = std::move(item);
          Next();
        } else {
          return Fail(absl::StrCat("expected name or number, got ", DescribeToken(Current())));
        }
      } else if (IsOp("[")) {
        Next();
        KVJIT_TRY_ASSIGN(expr, ParseSubscript(std::move(expr), line));
      } else if (IsOp("(")) {
        KVJIT_TRY_ASSIGN(expr, ParseCall(std::move(expr), Expr::Kind::kCall, line));
      } else {
        return expr;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    int part = 0;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        is_slice = true;
        if (++part > 2) return Fail("unexpected ':'");
        Next();
        continue;
      }
      if (parts[part] != nullptr) return Fail(absl::StrCat("expected token ']', got ", DescribeToken(Current())));
      KVJIT_TRY_ASSIGN(parts[part], ParseTuple(true));
    }
    Next();
    if (!is_slice) {
      if (parts[0] == nullptr) return Fail("expected an index");
      ExprPtr item = MakeExpr(Expr::Kind::kItem, line);
      item->children.push_back(std::move(target));
      item->children.push_back(std::move(parts[0]));
      return item;
    }
    ExprPtr slice = MakeExpr(Expr::Kind::kSlice, line);
    slice->children.push_back(std::move(target));
    for (ExprPtr& p : parts) slice->children.push_back(std::move(p));
    return slice;
  }

  // `(args, name=value)` after `callee` (null for a filter or test without
  // an operand yet); the current token is '('.
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee, Expr::Kind kind, int line) {
    ExprPtr call = MakeExpr(kind, line);
    call->children.push_back(std::move(callee));
    KVJIT_TRY(ParseArguments(*call));
    return call;
  }

  absl::Status ParseArguments(Expr& call) {
    KVJIT_TRY(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) KVJIT_TRY(ExpectOp(","));
      first = false;
      if (IsOp(")")) break;
      if (Current().kind == TokenKind::kName && Peek().kind == TokenKind::kOperator && Peek().value == "=") {
        std::string keyword = Current().value;
        Next();
        Next();
        KVJIT_TRY_ASSIGN(ExprPtr value, ParseExpression(true));
        call.keywords.emplace_back(std::move(keyword), std::move(value));
      } else {
        if (!call.keywords.empty()) return Fail("invalid syntax for function call expression");
        KVJIT_TRY_ASSIGN(ExprPtr value, ParseExpression(true));
        call.children.push_back(std::move(value));
      }
    }
    Next();
    return absl::OkStatus();
  }

  // One filter, `name` or `name(args)`, applied to `operand`.
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr operand) {
    const int line = Current().line;
    KVJIT_TRY_ASSIGN(std::string name, ExpectName());
    while (IsOp(".")) {
      Next();
      KVJIT_TRY_ASSIGN(std::string more, ExpectName());
      name += "." + more;
    }
    ExprPtr filter = MakeExpr(Expr::Kind::kFilter, line);
    filter->name = name;
    filter->children.push_back(std::move(operand));
    if (IsOp("(")) KVJIT_TRY(ParseArguments(*filter));
    return filter;
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr expr) {
    while (true) {
      if (IsOp("|")) {
        Next();
        KVJIT_TRY_ASSIGN(expr, ParseFilter(std::move(expr)));
      } else if (IsName("is")) {
        const int line = Current().line;
        Next();
        ExprPtr test = MakeExpr(Expr::Kind::kTest, line);
        if (IsName("not")) {
          test->negated = true;
          Next();
        }
        KVJIT_TRY_ASSIGN(test->name, ExpectName());
        test->children.push_back(std::move(expr));
        if (IsOp("(")) {
          KVJIT_TRY(ParseArguments(*test));
        } else if ((Current().kind == TokenKind::kName || Current().kind == TokenKind::kString ||
                    Current().kind == TokenKind::kInteger || Current().kind == TokenKind::kFloat ||
                    IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if")) {
          if (IsName("is")) return Fail("You cannot chain multiple tests with is");
          KVJIT_TRY_ASSIGN(ExprPtr argument, ParsePrimary());
          KVJIT_TRY_ASSIGN(argument, ParsePostfix(std::move(argument)));
          test->children.push_back(std::move(argument));
        }
        expr = std::move(test);
      } else if (IsOp("(")) {
        const int line = Current().line;
        KVJIT_TRY_ASSIGN(expr, ParseCall(std::move(expr), Expr::Kind::kCall, line));
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int body_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(const std::string& source) {
  KVJIT_TRY_ASSIGN(std::vector<Token> tokens, Tokenize(source));
  return Parser(std::move(tokens)).ParseAll();
}

}  // namespace kvjit::chat_template
