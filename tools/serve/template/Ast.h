#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_AST_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tools/serve/template/Value.h"

// The syntax tree of a template: expressions and statements, each with the
// line it starts on.
namespace kvjit::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // children
    kTuple,      // children
    kDict,       // children: key, value, key, value, ...
    kAttribute,  // children[0].name
    kItem,       // children[0][children[1]]
    kSlice,      // children[0][children[1]:children[2]:children[3]] (null where omitted)
    kCall,       // children[0](children[1..], keywords)
    kFilter,     // children[0] | name(children[1..], keywords)
    kTest,       // children[0] is [not] name(children[1..], keywords)
    kUnary,      // name children[0]: "-", "+", "not"
    kBinary,     // children[0] name children[1]: + - * / // % ** ~ and or
    kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ...
    kConditional,  // children[0] if children[1] else children[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // for targets in expr [if condition]: bodies[0]; else_body
    kSet,       // set targets = expr; or ns.attribute = expr (attribute set)
    kSetBlock,  // set targets[0] | filters: bodies[0]
    kMacro,     // macro name(parameters): bodies[0]
    kBreak,
    kContinue,
    kFilterBlock,  // filter filters: bodies[0]
    kScope,        // a body rendered in place (generation, with)
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string attribute;  // kSet on a namespace: targets[0].attribute
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body else_body;
  // kMacro: parameter names and defaults (null where none); kScope (with):
  // the names set in the new scope and their values.
  std::vector<std::pair<std::string, ExprPtr>> parameters;
  // kSetBlock, kFilterBlock: filters applied to the body's output, each a
  // kFilter whose children[0] is null.
  std::vector<ExprPtr> filters;
};

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_AST_H_
