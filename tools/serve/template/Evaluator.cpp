#include "tools/serve/template/Evaluator.h"

#include <functional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "tools/serve/template/Filters.h"
#include "tools/serve/template/Operations.h"

namespace kvjit::chat_template {
namespace {

constexpr char kLocatedPayload[] = "kvjit.chat_template/located";
constexpr char kExceptionPayload[] = "kvjit.chat_template/raise_exception";
constexpr int kMaxCallDepth = 64;

#define KVJIT_EVAL_TRY(expr)                             \
  do {                                                   \
    if (absl::Status _s = (expr); !_s.ok()) return _s;   \
  } while (0)
#define KVJIT_EVAL_ASSIGN(lhs, expr)                    \
  auto KVJIT_EVAL_CAT(_r, __LINE__) = (expr);           \
  if (!KVJIT_EVAL_CAT(_r, __LINE__).ok()) return KVJIT_EVAL_CAT(_r, __LINE__).status(); \
  lhs = std::move(*KVJIT_EVAL_CAT(_r, __LINE__))
#define KVJIT_EVAL_CAT_INNER(a, b) a##b
#define KVJIT_EVAL_CAT(a, b) KVJIT_EVAL_CAT_INNER(a, b)

// `status` with "line N: " before its message, unless it already names its
// line or is a template's own exception.
absl::Status At(int line, absl::Status status) {
  if (status.ok() || status.GetPayload(kLocatedPayload).has_value()) return status;
  absl::Status located(status.code(), absl::StrCat("line ", line, ": ", status.message()));
  located.SetPayload(kLocatedPayload, absl::Cord("1"));
  return located;
}

enum class Flow { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(const Value& context, const EvaluationOptions& options) : options_(options) {
    Dict root;
    for (const auto& [key, value] : context.dict()) root.emplace_back(key, value);
    frames_.push_back(Value::MakeDict(std::move(root)));
    globals_ = Value::MakeDict(Globals());
  }

  absl::Status Render(const Body& body, std::string& out) {
    KVJIT_EVAL_ASSIGN(Flow flow, Exec(body, out));
    (void)flow;
    return absl::OkStatus();
  }

 private:
  Dict Globals() {
    Dict globals;
    const auto add = [&](const char* name, Callable callable) {
      globals.emplace_back(Value::String(name), Value::MakeCallable(name, std::move(callable)));
    };
    add("range", [](CallArguments& args) -> absl::StatusOr<Value> {
      int64_t start = 0, stop = 0, step = 1;
      const List& p = args.positional;
      for (const Value& v : p) {
        if (!v.is_int() && !v.is_bool()) return absl::InvalidArgumentError("range() arguments must be integers");
      }
      if (p.size() == 1) stop = p[0].int_value();
      else if (p.size() == 2 || p.size() == 3) {
        start = p[0].int_value();
        stop = p[1].int_value();
        if (p.size() == 3) step = p[2].int_value();
      } else {
        return absl::InvalidArgumentError(absl::StrCat("range expected 1 to 3 arguments, got ", p.size()));
      }
      if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
      const int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                     : (start > stop ? (start - stop - step - 1) / -step : 0);
      if (count > 100000) {
        return absl::InvalidArgumentError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      List items;
      for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
      return Value::MakeList(std::move(items));
    });
    add("namespace", [](CallArguments& args) -> absl::StatusOr<Value> {
      Dict items;
      for (const Value& v : args.positional) {
        if (!v.is_dict()) return absl::InvalidArgumentError("namespace() takes mappings as positional arguments");
        for (const auto& [key, value] : v.dict()) items.emplace_back(key, value);
      }
      Value ns = Value::MakeNamespace(std::move(items));
      for (const auto& [key, value] : args.keyword) ns.Set(Value::String(key), value);
      return ns;
    });
    add("dict", [](CallArguments& args) -> absl::StatusOr<Value> {
      Value dict = Value::MakeDict();
      for (const Value& v : args.positional) {
        if (!v.is_dict()) return absl::InvalidArgumentError("dict() takes a mapping");
        for (const auto& [key, value] : v.dict()) dict.Set(key, value);
      }
      for (const auto& [key, value] : args.keyword) dict.Set(Value::String(key), value);
      return dict;
    });
    add("raise_exception", [](CallArguments& args) -> absl::StatusOr<Value> {
      const std::string message = args.positional.empty() ? "" : args.positional[0].Str();
      absl::Status status = absl::InvalidArgumentError(message);
      status.SetPayload(kLocatedPayload, absl::Cord("1"));
      status.SetPayload(kExceptionPayload, absl::Cord("1"));
      return status;
    });
    const std::time_t* now = options_.now;
    add("strftime_now", [now](CallArguments& args) -> absl::StatusOr<Value> {
      const std::string format = args.positional.empty() ? "" : args.positional[0].Str();
      const std::time_t t = now != nullptr ? *now : std::time(nullptr);
      std::tm local;
      if (now != nullptr) gmtime_r(&t, &local);
      else localtime_r(&t, &local);
      char buffer[512];
      const size_t n = std::strftime(buffer, sizeof(buffer), format.c_str(), &local);
      return Value::String(std::string(buffer, n));
    });
    return globals;
  }

  Value Lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (const Value* found = it->Find(name)) return *found;
    }
    if (const Value* found = globals_.Find(name)) return *found;
    return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
  }

  void Assign(const std::string& name, Value value) { frames_.back().Set(Value::String(name), std::move(value)); }

  absl::Status AssignTargets(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      Assign(targets[0], value);
      return absl::OkStatus();
    }
    absl::StatusOr<List> unpacked = Iterate(value);
    if (!unpacked.ok()) return At(line, unpacked.status());
    const List& items = *unpacked;
    if (items.size() > targets.size()) {
      return At(line, absl::InvalidArgumentError(absl::StrCat("too many values to unpack (expected ", targets.size(), ")")));
    }
    if (items.size() < targets.size()) {
      return At(line, absl::InvalidArgumentError(absl::StrCat("not enough values to unpack (expected ", targets.size(),
                                                              ", got ", items.size(), ")")));
    }
    for (size_t i = 0; i < targets.size(); ++i) Assign(targets[i], items[i]);
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> Exec(const Body& body, std::string& out) {
    for (const StmtPtr& stmt : body) {
      KVJIT_EVAL_ASSIGN(Flow flow, ExecOne(*stmt, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Value> ApplyFilters(const std::vector<ExprPtr>& filters, Value value) {
    for (const ExprPtr& filter : filters) {
      CallArguments args;
      KVJIT_EVAL_TRY(EvalArguments(*filter, 1, args));
      absl::StatusOr<Value> filtered = ApplyFilter(filter->name, value, args);
      if (!filtered.ok()) return At(filter->line, filtered.status());
      value = std::move(*filtered);
    }
    return value;
  }

  absl::StatusOr<Flow> ExecOne(const Stmt& stmt, std::string& out) {
    switch (stmt.kind) {
      case Stmt::Kind::kText: out += stmt.text; return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        KVJIT_EVAL_ASSIGN(Value value, Eval(*stmt.expr));
        out += value.Str();
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf: {
        for (size_t i = 0; i < stmt.conditions.size(); ++i) {
          KVJIT_EVAL_ASSIGN(Value condition, Eval(*stmt.conditions[i]));
          if (condition.Truthy()) return Exec(stmt.bodies[i], out);
        }
        return Exec(stmt.else_body, out);
      }
      case Stmt::Kind::kFor: return ExecFor(stmt, out);
      case Stmt::Kind::kSet: {
        KVJIT_EVAL_ASSIGN(Value value, Eval(*stmt.expr));
        if (!stmt.attribute.empty()) {
          Value target = Lookup(stmt.targets[0]);
          if (!target.is_namespace()) {
            return At(stmt.line, absl::InvalidArgumentError("Cannot assign attribute on non-namespace object"));
          }
          target.Set(Value::String(stmt.attribute), std::move(value));
          return Flow::kNormal;
        }
        KVJIT_EVAL_TRY(AssignTargets(stmt.targets, value, stmt.line));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        KVJIT_EVAL_ASSIGN(Flow flow, Exec(stmt.bodies[0], captured));
        (void)flow;
        KVJIT_EVAL_ASSIGN(Value value, ApplyFilters(stmt.filters, Value::String(std::move(captured))));
        Assign(stmt.targets[0], std::move(value));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        KVJIT_EVAL_ASSIGN(Flow flow, Exec(stmt.bodies[0], captured));
        (void)flow;
        KVJIT_EVAL_ASSIGN(Value value, ApplyFilters(stmt.filters, Value::String(std::move(captured))));
        out += value.Str();
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: {
        Assign(stmt.text, MakeMacro(stmt));
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kScope: {
        Value frame = Value::MakeDict();
        for (const auto& [name, expr] : stmt.parameters) {
          KVJIT_EVAL_ASSIGN(Value value, Eval(*expr));
          frame.Set(Value::String(name), value);
        }
        frames_.push_back(frame);
        absl::StatusOr<Flow> flow = Exec(stmt.bodies[0], out);
        frames_.pop_back();
        return flow;
      }
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, std::string& out) {
    KVJIT_EVAL_ASSIGN(Value iterable, Eval(*stmt.expr));
    absl::StatusOr<List> all = Iterate(iterable);
    if (!all.ok()) return At(stmt.line, all.status());
    List items;
    if (stmt.condition != nullptr) {
      for (const Value& item : *all) {
        frames_.push_back(Value::MakeDict());
        absl::Status bound = AssignTargets(stmt.targets, item, stmt.line);
        absl::StatusOr<Value> keep = bound.ok() ? Eval(*stmt.condition) : absl::StatusOr<Value>(bound);
        frames_.pop_back();
        if (!keep.ok()) return keep.status();
        if (keep->Truthy()) items.push_back(item);
      }
    } else {
      items = std::move(*all);
    }
    if (items.empty()) {
      frames_.push_back(Value::MakeDict());
      absl::StatusOr<Flow> flow = Exec(stmt.else_body, out);
      frames_.pop_back();
      if (!flow.ok()) return flow.status();
      return Flow::kNormal;
    }
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      Dict loop = {
          {Value::String("index"), Value::Int(i + 1)},
          {Value::String("index0"), Value::Int(i)},
          {Value::String("revindex"), Value::Int(length - i)},
          {Value::String("revindex0"), Value::Int(length - i - 1)},
          {Value::String("first"), Value::Bool(i == 0)},
          {Value::String("last"), Value::Bool(i == length - 1)},
          {Value::String("length"), Value::Int(length)},
          {Value::String("depth"), Value::Int(1)},
          {Value::String("depth0"), Value::Int(0)},
          {Value::String("previtem"), i > 0 ? items[i - 1] : Value::Undefined("there is no previous item")},
          {Value::String("nextitem"), i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item")},
      };
      loop.emplace_back(Value::String("cycle"),
                        Value::MakeCallable("cycle", [i](CallArguments& args) -> absl::StatusOr<Value> {
                          if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
                          return args.positional[static_cast<size_t>(i) % args.positional.size()];
                        }));
      frames_.push_back(Value::MakeDict());
      absl::Status bound = AssignTargets(stmt.targets, items[i], stmt.line);
      if (!bound.ok()) {
        frames_.pop_back();
        return bound;
      }
      Assign("loop", Value::MakeDict(std::move(loop)));
      absl::StatusOr<Flow> flow = Exec(stmt.bodies[0], out);
      frames_.pop_back();
      if (!flow.ok()) return flow.status();
      if (*flow == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value MakeMacro(const Stmt& stmt) {
    const Stmt* macro = &stmt;
    return Value::MakeCallable(stmt.text, [this, macro](CallArguments& args) -> absl::StatusOr<Value> {
      if (call_depth_ >= kMaxCallDepth) return absl::InvalidArgumentError("macros nested too deeply");
      if (args.positional.size() > macro->parameters.size()) {
        return absl::InvalidArgumentError(absl::StrCat("macro '", macro->text, "' takes not more than ",
                                                       macro->parameters.size(), " argument(s)"));
      }
      Value frame = Value::MakeDict();
      std::vector<Value> saved = frames_;
      for (size_t i = 0; i < macro->parameters.size(); ++i) {
        const auto& [name, default_expr] = macro->parameters[i];
        Value value = Value::Undefined(absl::StrCat("parameter '", name, "' was not provided"));
        bool given = false;
        if (i < args.positional.size()) {
          value = args.positional[i];
          given = true;
        }
        for (const auto& [keyword, v] : args.keyword) {
          if (keyword == name) {
            value = v;
            given = true;
          }
        }
        if (!given && default_expr != nullptr) {
          frames_ = {saved.front(), frame};
          absl::StatusOr<Value> d = Eval(*default_expr);
          frames_ = saved;
          if (!d.ok()) return d.status();
          value = *d;
        }
        frame.Set(Value::String(name), value);
      }
      for (const auto& [keyword, v] : args.keyword) {
        bool known = false;
        for (const auto& parameter : macro->parameters) known = known || parameter.first == keyword;
        if (!known) {
          return absl::InvalidArgumentError(absl::StrCat("macro '", macro->text, "' takes no keyword argument '", keyword, "'"));
        }
      }
      frames_ = {saved.front(), frame};
      ++call_depth_;
      std::string out;
      absl::StatusOr<Flow> flow = Exec(macro->bodies[0], out);
      --call_depth_;
      frames_ = saved;
      if (!flow.ok()) return flow.status();
      return Value::String(std::move(out));
    });
  }

  // Positional arguments from children[first...] and the keywords.
  absl::Status EvalArguments(const Expr& expr, size_t first, CallArguments& args) {
    for (size_t i = first; i < expr.children.size(); ++i) {
      KVJIT_EVAL_ASSIGN(Value value, Eval(*expr.children[i]));
      args.positional.push_back(std::move(value));
    }
    for (const auto& [name, value_expr] : expr.keywords) {
      KVJIT_EVAL_ASSIGN(Value value, Eval(*value_expr));
      args.keyword.emplace_back(name, std::move(value));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Value> Eval(const Expr& expr) {
    if (++depth_ > 400) {
      --depth_;
      return At(expr.line, absl::InvalidArgumentError("expression nested too deeply"));
    }
    absl::StatusOr<Value> value = EvalInner(expr);
    --depth_;
    if (!value.ok()) return At(expr.line, value.status());
    return value;
  }

  absl::StatusOr<Value> EvalInner(const Expr& expr) {
    switch (expr.kind) {
      case Expr::Kind::kLiteral: return expr.literal;
      case Expr::Kind::kName: return Lookup(expr.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& child : expr.children) {
          KVJIT_EVAL_ASSIGN(Value value, Eval(*child));
          items.push_back(std::move(value));
        }
        if (expr.kind == Expr::Kind::kTuple) return Value::MakeTuple(std::move(items));
        return Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Value dict = Value::MakeDict();
        for (size_t i = 0; i + 1 < expr.children.size(); i += 2) {
          KVJIT_EVAL_ASSIGN(Value key, Eval(*expr.children[i]));
          KVJIT_EVAL_ASSIGN(Value value, Eval(*expr.children[i + 1]));
          if (key.is_list() || key.is_dict() || key.is_undefined()) {
            return absl::InvalidArgumentError(absl::StrCat("unhashable type: '", key.is_list() ? "list" : "dict", "'"));
          }
          dict.Set(key, value);
        }
        return dict;
      }
      case Expr::Kind::kAttribute: {
        KVJIT_EVAL_ASSIGN(Value object, Eval(*expr.children[0]));
        return GetAttribute(object, expr.name);
      }
      case Expr::Kind::kItem: {
        KVJIT_EVAL_ASSIGN(Value object, Eval(*expr.children[0]));
        KVJIT_EVAL_ASSIGN(Value key, Eval(*expr.children[1]));
        return GetItem(object, key);
      }
      case Expr::Kind::kSlice: {
        KVJIT_EVAL_ASSIGN(Value object, Eval(*expr.children[0]));
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (expr.children[i + 1] != nullptr) {
            KVJIT_EVAL_ASSIGN(parts[i], Eval(*expr.children[i + 1]));
          }
        }
        return GetSlice(object, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        KVJIT_EVAL_ASSIGN(Value callee, Eval(*expr.children[0]));
        if (callee.is_undefined()) return UndefinedError(callee);
        if (!callee.is_callable()) return absl::InvalidArgumentError(absl::StrCat("'", callee.TypeRepr(), "' is not callable"));
        CallArguments args;
        KVJIT_EVAL_TRY(EvalArguments(expr, 1, args));
        return callee.callable()(args);
      }
      case Expr::Kind::kFilter: {
        KVJIT_EVAL_ASSIGN(Value operand, Eval(*expr.children[0]));
        CallArguments args;
        KVJIT_EVAL_TRY(EvalArguments(expr, 1, args));
        return ApplyFilter(expr.name, operand, args);
      }
      case Expr::Kind::kTest: {
        KVJIT_EVAL_ASSIGN(Value operand, Eval(*expr.children[0]));
        CallArguments args;
        KVJIT_EVAL_TRY(EvalArguments(expr, 1, args));
        KVJIT_EVAL_ASSIGN(bool result, ApplyTest(expr.name, operand, args));
        return Value::Bool(result != expr.negated);
      }
      case Expr::Kind::kUnary: {
        KVJIT_EVAL_ASSIGN(Value operand, Eval(*expr.children[0]));
        if (expr.name == "not") return Value::Bool(!operand.Truthy());
        return Negate(operand, expr.name == "-");
      }
      case Expr::Kind::kBinary: {
        KVJIT_EVAL_ASSIGN(Value left, Eval(*expr.children[0]));
        if (expr.name == "and") return left.Truthy() ? Eval(*expr.children[1]) : left;
        if (expr.name == "or") return left.Truthy() ? left : Eval(*expr.children[1]);
        KVJIT_EVAL_ASSIGN(Value right, Eval(*expr.children[1]));
        if (expr.name == "~") return Value::String(left.Str() + right.Str());
        return BinaryOperation(expr.name, left, right);
      }
      case Expr::Kind::kCompare: {
        KVJIT_EVAL_ASSIGN(Value left, Eval(*expr.children[0]));
        for (size_t i = 0; i < expr.ops.size(); ++i) {
          KVJIT_EVAL_ASSIGN(Value right, Eval(*expr.children[i + 1]));
          KVJIT_EVAL_ASSIGN(bool result, Compare(expr.ops[i], left, right));
          if (!result) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kConditional: {
        KVJIT_EVAL_ASSIGN(Value condition, Eval(*expr.children[1]));
        if (condition.Truthy()) return Eval(*expr.children[0]);
        if (expr.children[2] != nullptr) return Eval(*expr.children[2]);
        return Value::Undefined(absl::StrCat("the inline if-expression on line ", expr.line,
                                             " evaluated to false and no else section was defined."));
      }
    }
    return Value::Undefined();
  }

  EvaluationOptions options_;
  std::vector<Value> frames_;
  Value globals_;
  int call_depth_ = 0;
  int depth_ = 0;
};

absl::Status CheckExpr(const Expr* expr) {
  if (expr == nullptr) return absl::OkStatus();
  if (expr->kind == Expr::Kind::kFilter && !HasFilter(expr->name)) {
    return At(expr->line, absl::InvalidArgumentError(absl::StrCat("No filter named '", expr->name, "'.")));
  }
  if (expr->kind == Expr::Kind::kTest && !HasTest(expr->name)) {
    return At(expr->line, absl::InvalidArgumentError(absl::StrCat("No test named '", expr->name, "'.")));
  }
  for (const ExprPtr& child : expr->children) KVJIT_EVAL_TRY(CheckExpr(child.get()));
  for (const auto& [name, child] : expr->keywords) KVJIT_EVAL_TRY(CheckExpr(child.get()));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckNames(const Body& body) {
  for (const StmtPtr& stmt : body) {
    KVJIT_EVAL_TRY(CheckExpr(stmt->expr.get()));
    KVJIT_EVAL_TRY(CheckExpr(stmt->condition.get()));
    for (const ExprPtr& e : stmt->conditions) KVJIT_EVAL_TRY(CheckExpr(e.get()));
    for (const ExprPtr& e : stmt->filters) {
      if (!HasFilter(e->name)) {
        return At(e->line, absl::InvalidArgumentError(absl::StrCat("No filter named '", e->name, "'.")));
      }
      KVJIT_EVAL_TRY(CheckExpr(e.get()));
    }
    for (const auto& [name, e] : stmt->parameters) KVJIT_EVAL_TRY(CheckExpr(e.get()));
    for (const Body& b : stmt->bodies) KVJIT_EVAL_TRY(CheckNames(b));
    KVJIT_EVAL_TRY(CheckNames(stmt->else_body));
  }
  return absl::OkStatus();
}

absl::Status Evaluate(const Body& body, const Value& context, const EvaluationOptions& options, std::string& out) {
  if (!context.is_dict()) return absl::InvalidArgumentError("the template's context must be a JSON object");
  Evaluator evaluator(context, options);
  return evaluator.Render(body, out);
}

bool IsTemplateException(const absl::Status& status) { return status.GetPayload(kExceptionPayload).has_value(); }

}  // namespace kvjit::chat_template
