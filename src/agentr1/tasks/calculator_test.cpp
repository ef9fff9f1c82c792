#include "agentr1/tasks/calculator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"

namespace agentr1::tasks {
namespace {

std::string eval(const std::string& e) { return evaluate_expression(e).text; }

struct Case {
  const char* expr;
  const char* want;
};

TEST(Calculator, HandWorkedValues) {
  const std::vector<Case> cases = {
      {"2 + 3", "5"},
      {"1234 + 567", "1801"},
      {"(1234 + 567) * 3", "5403"},
      {"1234 + 567 * 3", "2935"},            // 567*3 = 1701; 1234 + 1701
      {"100 - 58 - 12", "30"},               // left associative
      {"100 - (58 - 12)", "54"},
      {"96 / 4 / 2", "12"},                  // (96/4)/2
      {"96 / (4 / 2)", "48"},
      {"7 / 2", "3.5"},
      {"1 / 4", "0.25"},
      {"1 / 8", "0.125"},
      {"2 / 3", "0.6666666667"},             // 10 significant digits, rounded
      {"1 / 3", "0.3333333333"},
      {"10 / 3", "3.333333333"},
      {"100 / 7", "14.28571429"},            // 14.285714285714...
      {"1 / 7000", "0.0001428571429"},       // leading zeros are not significant
      {"-5 + 2", "-3"},
      {"-(3 + 4) * 2", "-14"},
      {"--5", "5"},
      {"+7", "7"},
      {"3 * -2", "-6"},
      {"3 - -2", "5"},
      {"2 * (3 + (4 - 1)) * 5", "60"},
      {"  42  ", "42"},
      {"\t6*7\n", "42"},
      {"1.5 + 2.25", "3.75"},
      {"0.1 + 0.2", "0.3"},                  // exact, not 0.30000000000000004
      {"0.1 * 3", "0.3"},
      {"2.50 * 4", "10"},
      {".5 + .5", "1"},
      {"5. + 1", "6"},
      {"007 + 1", "8"},
      {"12.0", "12"},
      {"48 * 215", "10320"},
      {"827 * 46 - 1999", "36043"},          // 827*46 = 38042
      {"(5620 - 23 * 117) / 13", "225.3076923"},  // 5620 - 2691 = 2929 = 13 * 225 + 4; 4/13 = 0.307692307...
      {"999999999999999", "999999999999999"},
      {"123456789 * 1000000", "123456789000000"},
      {"-0", "0"},
      {"0 * -5", "0"},
      {"1 - 1.0", "0"},
      {"-1 / 3", "-0.3333333333"},
      {"2 / 3 * 3", "2"},                    // exact rational arithmetic
      {"1 / 3 + 1 / 3 + 1 / 3", "1"},
  };
  for (const auto& c : cases) {
    CalcResult r = evaluate_expression(c.expr);
    EXPECT_TRUE(r.ok) << c.expr << " -> " << r.text;
    EXPECT_EQ(r.text, c.want) << "expression: " << c.expr;
  }
}

TEST(Calculator, ExactDivisionGivesInteger) {
  // 23 * 117 = 2691; 5616 - 2691 = 2925; 2925 / 13 = 225 (13 * 225 = 2925).
  CalcResult r = evaluate_expression("(5616 - 23 * 117) / 13");
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_EQ(r.text, "225");
  EXPECT_TRUE(r.exact);
  EXPECT_FALSE(evaluate_expression("2 / 3").exact);
  EXPECT_TRUE(evaluate_expression("7 / 2").exact);
}

TEST(Calculator, RoundingCarriesIntoIntegerPart) {
  CalcOptions o;
  o.significant_digits = 3;
  // 1999/2 = 999.5 -> 3 significant digits -> 1000 (carry through all digits)
  EXPECT_EQ(evaluate_expression("1999 / 2", o).text, "1000");
  // 0.9996 with 3 digits -> 1
  EXPECT_EQ(evaluate_expression("9996 / 10000", o).text, "1");
  // 2/3 -> 0.667
  EXPECT_EQ(evaluate_expression("2 / 3", o).text, "0.667");
  EXPECT_EQ(evaluate_expression("-2 / 3", o).text, "-0.667");
}

struct ErrCase {
  const char* expr;
  const char* kind;
  const char* must_contain;
};

TEST(Calculator, ErrorsAreTextsForTheModel) {
  const std::vector<ErrCase> cases = {
      {"", "empty", "empty expression"},
      {"   ", "empty", "empty expression"},
      {"2 + x", "syntax", "unexpected character 'x' at position 5"},
      {"1,234 + 5", "syntax", "unexpected character ',' at position 2; write numbers without thousands"},
      {"2 ^ 3", "syntax", "'^' at position 3; powers are not supported"},
      {"3 = 3", "syntax", "without '='"},
      {"5 \u00d7 3", "syntax", "unexpected character '\u00d7' at position 3; use * for multiplication"},
      {"import os", "syntax", "unexpected character 'i' at position 1"},
      {"__import__('os')", "syntax", "unexpected character '_' at position 1"},
      {"(2 + 3", "unbalanced", "'(' at position 1 is never closed"},
      {"2 + 3)", "unbalanced", "')' at position 6 has no matching '('"},
      {"(2 + (3", "unbalanced", "2 '(' are unclosed"},
      {"1 / 0", "division_by_zero", "division by zero at position 3"},
      {"5 / (3 - 3)", "division_by_zero", "division by zero"},
      {"5 / 0.0", "division_by_zero", "division by zero"},
      {"2 +", "syntax", "expression ends after '+' at position 3; expected a number or '(' next"},
      {"2 3", "syntax", "unexpected '3' at position 3: expected an operator"},
      {"(2 3)", "syntax", "unexpected '3' at position 4: expected an operator (+ - * /) or ')'"},
      {"2 * * 3", "syntax", "unexpected '*' at position 5: expected a number or '('"},
      {"()", "syntax", "unexpected ')' at position 2: expected a number or '('"},
      {"1.2.3", "syntax", "unexpected '.' at position 4"},
      {".", "syntax", "malformed number '.' at position 1"},
      {"10000000000000000", "too_large", "is too large"},
      {"99999999 * 99999999", "too_large", "result too large"},
      {"1000000000000000 + 1", "too_large", "1e15"},
  };
  for (const auto& c : cases) {
    CalcResult r = evaluate_expression(c.expr);
    EXPECT_FALSE(r.ok) << c.expr;
    EXPECT_EQ(r.error_kind, c.kind) << c.expr << " -> " << r.text;
    EXPECT_EQ(r.text.rfind("Error: ", 0), 0u) << r.text;
    EXPECT_NE(r.text.find(c.must_contain), std::string::npos)
        << "expression: " << c.expr << "\n  got: " << r.text << "\n  want substring: " << c.must_contain;
  }
}

TEST(Calculator, LengthAndDepthLimits) {
  std::string long_expr = "1";
  while (long_expr.size() < 201) long_expr += "+1";
  CalcResult r = evaluate_expression(long_expr);
  EXPECT_EQ(r.error_kind, "too_long");
  EXPECT_NE(r.text.find("the limit is 200 characters"), std::string::npos) << r.text;

  std::string deep = std::string(33, '(') + "1" + std::string(33, ')');
  r = evaluate_expression(deep);
  EXPECT_EQ(r.error_kind, "too_deep") << r.text;
  EXPECT_NE(r.text.find("33 levels deep; the limit is 32"), std::string::npos) << r.text;
  std::string ok_deep = std::string(32, '(') + "1" + std::string(32, ')');
  EXPECT_EQ(evaluate_expression(ok_deep).text, "1");

  r = evaluate_expression(std::string(40, '-') + "1");
  EXPECT_EQ(r.error_kind, "too_deep") << r.text;
  EXPECT_EQ(evaluate_expression(std::string(10, '-') + "1").text, "1");

  CalcOptions bad;
  bad.max_depth = 0;
  EXPECT_THROW(evaluate_expression("1", bad), Error);
}

TEST(Calculator, LongDecimalsFallBackToApproximation) {
  // Too many digits for an exact 64-bit rational: evaluated in long double.
  CalcResult r = evaluate_expression("0.1234567890123456789 * 2");
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.text, "0.246913578");  // 0.2469135780246913578 -> 10 significant digits
  // An exact intermediate that overflows int64 rationals goes approximate as well.
  // (denominator 999999937 * 999999929 * 999999893 > 2^63).
  r = evaluate_expression("1 / 999999937 / 999999929 / 999999893 * 999999937 * 999999929 * 999999893");
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_FALSE(r.exact);
  EXPECT_EQ(r.text, "1");
}

TEST(Calculator, ToolInterface) {
  Calculator calc;
  EXPECT_EQ(calc.name(), "calculator");
  json params = calc.parameters();
  EXPECT_EQ(params["type"], "object");
  EXPECT_EQ(params["properties"]["expression"]["type"], "string");
  EXPECT_EQ(params["required"], json::array({"expression"}));

  env::ToolResult r = calc.execute({{"expression", "(1234 + 567) * 3"}});
  EXPECT_EQ(r.text, "5403");
  EXPECT_EQ(r.info["error"], false);
  EXPECT_EQ(r.info["exact"], true);

  r = calc.execute(json::object());
  EXPECT_EQ(r.text.rfind("Error: missing required argument 'expression'", 0), 0u) << r.text;
  EXPECT_EQ(r.info["error"], true);

  r = calc.execute({{"expression", 42}});
  EXPECT_EQ(r.text.rfind("Error: argument 'expression' must be a string", 0), 0u) << r.text;
  EXPECT_EQ(r.info["error"], true);

  r = calc.execute(json::array({"2+2"}));
  EXPECT_EQ(r.text.rfind("Error: arguments must be a JSON object", 0), 0u) << r.text;

  r = calc.execute({{"expression", "1/0"}});
  EXPECT_EQ(r.info["error"], true);
  EXPECT_EQ(r.info["error_kind"], "division_by_zero");

  // Extra arguments are ignored (the model sometimes adds some).
  r = calc.execute({{"expression", "2*21"}, {"note", "x"}});
  EXPECT_EQ(r.text, "42");
}

// Random expressions checked against Python's fractions.Fraction (an independent,
// exact reference). Integers must match exactly; other values to 10 significant digits.
TEST(Calculator, MatchesPythonFractionsOnRandomExpressions) {
  Rng rng(derive_seed(2024, {1}));
  std::vector<std::string> exprs;
  std::function<std::string(int)> gen = [&](int depth) -> std::string {
    if (depth == 0 || rng.bernoulli(0.3)) {
      int64_t v = rng.uniform_int(0, 2000);
      std::string s = std::to_string(v);
      if (rng.bernoulli(0.15)) s += "." + std::to_string(rng.uniform_int(0, 99));
      if (rng.bernoulli(0.1)) s = "-" + s;
      return s;
    }
    const char ops[] = {'+', '-', '*', '/'};
    std::string a = gen(depth - 1), b = gen(depth - 1);
    std::string e = a + " " + ops[rng.choice(4)] + " " + b;
    return rng.bernoulli(0.5) ? "(" + e + ")" : e;
  };
  for (int i = 0; i < 300; ++i) exprs.push_back(gen(static_cast<int>(rng.uniform_int(1, 4))));

  std::string dir = ::testing::TempDir();
  std::string in_path = dir + "/calc_exprs.txt";
  std::string out_path = dir + "/calc_ref.txt";
  std::string py_path = dir + "/calc_ref.py";
  {
    std::ofstream f(in_path);
    for (const auto& e : exprs) f << e << "\n";
    std::ofstream py(py_path);
    py << "import re, sys\n"
          "from fractions import Fraction\n"
          "out = open(sys.argv[2], 'w')\n"
          "for line in open(sys.argv[1]):\n"
          "    e = line.strip()\n"
          "    src = re.sub(r'(\\d+(?:\\.\\d*)?|\\.\\d+)', lambda m: 'Fraction(\"%s\")' % m.group(1), e)\n"
          "    try:\n"
          "        v = eval(src, {'Fraction': Fraction, '__builtins__': {}})\n"
          "    except ZeroDivisionError:\n"
          "        out.write('zerodiv\\n'); continue\n"
          "    out.write('%d %d\\n' % (v.numerator, v.denominator))\n";
  }
  std::string cmd = std::string(AGENTR1_PYTHON) + " " + py_path + " " + in_path + " " + out_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream ref(out_path);
  int checked = 0, zerodiv = 0, too_large = 0;
  for (const auto& e : exprs) {
    std::string line;
    ASSERT_TRUE(std::getline(ref, line));
    CalcResult r = evaluate_expression(e);
    if (line == "zerodiv") {
      EXPECT_EQ(r.error_kind, "division_by_zero") << e << " -> " << r.text;
      ++zerodiv;
      continue;
    }
    std::istringstream ls(line);
    long long num = 0, den = 0;
    std::string num_s, den_s;
    ls >> num_s >> den_s;
    long double ref_v = std::strtold(num_s.c_str(), nullptr) / std::strtold(den_s.c_str(), nullptr);
    if (std::fabs(ref_v) > 1e15L) {
      EXPECT_EQ(r.error_kind, "too_large") << e;
      ++too_large;
      continue;
    }
    ASSERT_TRUE(r.ok) << e << " -> " << r.text;
    if (den_s == "1") {
      EXPECT_EQ(r.text, num_s) << e;
    } else {
      long double got = std::strtold(r.text.c_str(), nullptr);
      long double tol = std::max(std::fabs(ref_v) * 1e-9L, 1e-12L);
      EXPECT_LE(std::fabs(got - ref_v), tol) << e << " -> " << r.text << " ref " << num_s << "/" << den_s;
    }
    (void)num;
    (void)den;
    ++checked;
  }
  EXPECT_GT(checked, 200);
  std::printf("checked %d expressions against Fraction (%d division by zero, %d too large)\n", checked,
              zerodiv, too_large);
}

}  // namespace
}  // namespace agentr1::tasks
