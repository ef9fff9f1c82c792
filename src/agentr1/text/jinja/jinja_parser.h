// agentr1/text/jinja/jinja_parser.h — Jinja template text -> syntax tree, with the lexer
// settings HF transformers uses (trim_blocks, lstrip_blocks, a single trailing newline
// dropped, loopcontrols, its {% generation %} block). Syntax errors throw
// agentr1::Error naming the line, column and construct.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/text/jinja/jinja_value.h"

namespace agentr1::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Type {
    kConst,     // value
    kName,      // name
    kList,      // args
    kTuple,     // args
    kDict,      // args: key, value, key, value...
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null = omitted)
    kCall,      // args[0](args[1:], kwargs)
    kFilter,    // args[0]|name(args[1:], kwargs)
    kTest,      // args[0] is [not] name(args[1:], kwargs); negated
    kUnary,     // op args[0]: "-", "+", "not"
    kBinary,    // args[0] op args[1]: + - * / // % ** ~ and or
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2]...
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Type type;
  size_t pos = 0;  // offset in the normalised source (for error messages)
  Value value;
  std::string name;  // name, attribute, filter/test name, operator
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Assignment target: a name, a tuple of targets, or ns.attr.
struct Target {
  std::string name;
  std::string attr;  // non-empty: name.attr = ...
  std::vector<Target> items;
  bool is_tuple = false;
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum Type {
    kText,        // text
    kOutput,      // {{ expr }}
    kIf,          // conds[i] -> bodies[i]; else_body
    kFor,         // for target in expr [if cond]: body; else_body
    kSet,         // target = expr
    kSetBlock,    // target = render(body) | filters
    kMacro,       // macro name(params): body
    kFilterBlock, // render(body) | filters
    kBreak,
    kContinue,
    kScope,       // generation / with: body (with: assignments first)
  };
  Type type;
  size_t pos = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  Target target;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<ExprPtr> filters;  // kFilter nodes whose args[0] is null (the input)
  std::vector<std::pair<Target, ExprPtr>> assigns;  // with
};

struct ParsedTemplate {
  std::string source;  // newlines normalised, a single trailing newline dropped
  Body body;
};

// Parses template source. Throws Error("jinja syntax error at line L, column C: ...").
ParsedTemplate parse_template(const std::string& source);

// "line L, column C" of an offset in source.
std::string line_col(const std::string& source, size_t pos);

}  // namespace agentr1::text::jinja
