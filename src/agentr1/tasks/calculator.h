// agentr1/tasks/calculator.h — the "calculator" tool: a safe arithmetic evaluator.
//
//   CalcResult r = evaluate_expression("(1234 + 567) * 3");   // r.ok, r.text == "5403"
//   CalcResult e = evaluate_expression("2 / 0");   // !e.ok, e.text == "Error: division by zero ..."
//
//   Calculator calc;                                           // an env::Tool
//   env::ToolResult t = calc.execute({{"expression", "7 / 2"}}); // t.text == "3.5"
//
// The grammar is a hand-written recursive-descent parser; nothing is ever executed:
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := ('+' | '-') unary | primary
//   primary := number | '(' expr ')'
//   number  := digits ['.' digits] | '.' digits        (no exponents, no separators)
// Arithmetic is exact on rationals with 64-bit numerator/denominator; when an exact
// intermediate would overflow, it continues in long double and the result is marked
// inexact. Integers print as integers; other values print as decimals with at most
// `significant_digits` significant digits, trailing zeros trimmed (1/4 -> "0.25",
// 2/3 -> "0.6666666667").
//
// Errors are texts for the model (they start with "Error:"), never exceptions: the
// policy's malformed input is an observation, not a crash.
#pragma once

#include <cstddef>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/env/tool.h"

namespace agentr1::tasks {

struct CalcOptions {
  size_t max_length = 200;        // longest expression accepted, in characters
  int max_depth = 32;             // deepest nesting of parentheses / unary signs
  int significant_digits = 10;    // digits shown for non-integer results
  double max_abs = 1e15;          // largest magnitude of any number or intermediate value

  // The calculator tool's kwargs (env_kwargs.tool_kwargs.calculator), bound by
  // bind_config (core/config.h).
  template <class V>
  void visit(V& v) {
    v.field("max_length", max_length, "longest expression accepted, in characters");
    v.field("max_depth", max_depth, "deepest nesting of parentheses / unary signs");
    v.field("significant_digits", significant_digits, "digits shown for non-integer results (1..18)");
    v.field("max_abs", max_abs, "largest magnitude of any number or intermediate value (0, 1e18]");
  }
  // Throws Error naming the field, the rule and the value.
  void validate() const;
  // kwargs (null = defaults) bound and validated; errors name
  // env_kwargs.tool_kwargs.calculator.<key>.
  static CalcOptions from_json(const json& kwargs);
};

struct CalcResult {
  bool ok = false;                // false: `text` is an "Error: ..." message
  std::string text;               // the value as the model sees it, or the error
  bool exact = false;             // ok and `text` is the exact value (no rounding)
  long double value = 0;          // the value (approximate when !exact)
  std::string error_kind;         // "" when ok; else e.g. "syntax", "division_by_zero"
};

// Evaluates `expr`. Never throws for any input string; throws Error only when
// `opts` itself is invalid (max_length == 0, max_depth < 1, significant_digits
// outside 1..18, max_abs not in (0, 1e18]).
CalcResult evaluate_expression(const std::string& expr, const CalcOptions& opts = {});

// The tool. Stateless and thread-safe.
class Calculator : public env::Tool {
 public:
  explicit Calculator(CalcOptions opts = {});
  std::string name() const override { return "calculator"; }
  std::string description() const override;
  // {"type":"object","properties":{"expression":{"type":"string",...}},"required":["expression"]}
  json parameters() const override;
  // args: {"expression": "<string>"}. Returns the value text, or an "Error: ..." text
  // for a bad argument or expression; info = {"error": bool, "exact": bool} plus
  // "error_kind" on errors. Never throws.
  env::ToolResult execute(const json& args) override;

 private:
  CalcOptions opts_;
};

}  // namespace agentr1::tasks
