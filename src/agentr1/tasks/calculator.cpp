#include "agentr1/tasks/calculator.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

using i128 = __int128;
using u128 = unsigned __int128;

// A number: exact rational num/den (den > 0, reduced) or an approximation.
struct Value {
  bool exact = true;
  int64_t num = 0;
  int64_t den = 1;
  long double approx = 0;
};

// Thrown inside the parser only; evaluate_expression turns it into a CalcResult.
struct CalcFailure {
  std::string kind;
  std::string message;  // without the "Error: " prefix
};

u128 abs128(i128 v) { return v < 0 ? static_cast<u128>(-(v + 1)) + 1 : static_cast<u128>(v); }

u128 gcd128(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

bool fits_i64(i128 v) { return v >= INT64_MIN && v <= INT64_MAX; }

std::string format_limit(double v) {
  double e = std::log10(v);
  if (std::fabs(e - std::round(e)) < 1e-12) return "1e" + std::to_string(static_cast<int>(std::round(e)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string format_approx_short(long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3Lg", v);
  return buf;
}

// 1-based character (code point) position of byte offset `i`.
size_t char_pos(const std::string& s, size_t i) {
  size_t n = 1;
  for (size_t k = 0; k < i && k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

size_t char_count(const std::string& s) { return char_pos(s, s.size()) - 1; }

// The whole UTF-8 character starting at byte i.
std::string char_at(const std::string& s, size_t i) {
  size_t j = i + 1;
  while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
  return s.substr(i, j - i);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_allowed(char c) {
  return is_digit(c) || is_space(c) || c == '.' || c == '+' || c == '-' || c == '*' ||
         c == '/' || c == '(' || c == ')';
}

std::string hint_for(const std::string& ch) {
  if (ch == ",") return "write numbers without thousands separators (1234, not 1,234)";
  if (ch == "^") return "powers are not supported; write the multiplication out (3 * 3 * 3)";
  if (ch == "x" || ch == "X" || ch == "\u00d7" || ch == "\u00b7") return "use * for multiplication";
  if (ch == "\u00f7" || ch == ":") return "use / for division";
  if (ch == "\u2212" || ch == "\u2013") return "use the ASCII minus sign -";
  if (ch == "=") return "give only the expression, without '='";
  if (ch == "%") return "percentages are not supported; write e.g. 15 / 100 * 80";
  if (ch == "$" || ch == "\u20ac" || ch == "\u00a3") return "leave out currency symbols";
  if (ch == "[" || ch == "]" || ch == "{" || ch == "}") return "use round parentheses ( )";
  return "only numbers, + - * / and parentheses are allowed";
}

class Parser {
 public:
  Parser(const std::string& s, const CalcOptions& o) : s_(s), o_(o) {}

  Value parse() {
    Value v = parse_expr();
    skip_ws();
    if (pos_ < s_.size()) {
      fail("syntax", "unexpected '" + char_at(s_, pos_) + "' at position " + pos_str(pos_) +
                         ": expected an operator (+ - * /)");
    }
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& kind, const std::string& msg) const {
    throw CalcFailure{kind, msg};
  }
  std::string pos_str(size_t i) const { return std::to_string(char_pos(s_, i)); }

  void skip_ws() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  void enter() {
    if (++depth_ > o_.max_depth) {
      fail("too_deep", "expression nested too deeply (more than " + std::to_string(o_.max_depth) +
                           " levels of parentheses or signs)");
    }
  }

  void check_magnitude(const Value& v, size_t at) const {
    if (std::fabs(v.approx) > static_cast<long double>(o_.max_abs) || std::isnan(v.approx) ||
        std::isinf(v.approx)) {
      fail("too_large", "result too large at position " + pos_str(at) + " (about " +
                            format_approx_short(v.approx) + "): values must stay within " +
                            format_limit(o_.max_abs) + " in absolute value");
    }
  }

  static Value make_exact(i128 n, i128 d) {
    if (d < 0) {
      n = -n;
      d = -d;
    }
    u128 g = gcd128(abs128(n), static_cast<u128>(d));
    if (g > 1) {
      n /= static_cast<i128>(g);
      d /= static_cast<i128>(g);
    }
    Value v;
    if (fits_i64(n) && fits_i64(d)) {
      v.num = static_cast<int64_t>(n);
      v.den = static_cast<int64_t>(d);
      v.approx = static_cast<long double>(v.num) / static_cast<long double>(v.den);
    } else {
      v.exact = false;
      v.approx = static_cast<long double>(n) / static_cast<long double>(d);
    }
    return v;
  }

  static Value make_approx(long double a) {
    Value v;
    v.exact = false;
    v.approx = a;
    return v;
  }

  Value apply(char op, const Value& a, const Value& b, size_t op_pos) const {
    if (op == '/') {
      bool zero = b.exact ? b.num == 0 : b.approx == 0;
      if (zero) fail("division_by_zero", "division by zero at position " + pos_str(op_pos));
    }
    Value r;
    if (a.exact && b.exact) {
      i128 an = a.num, ad = a.den, bn = b.num, bd = b.den;
      switch (op) {
        case '+': r = make_exact(an * bd + bn * ad, ad * bd); break;
        case '-': r = make_exact(an * bd - bn * ad, ad * bd); break;
        case '*': r = make_exact(an * bn, ad * bd); break;
        default: r = make_exact(an * bd, ad * bn); break;
      }
    } else {
      switch (op) {
        case '+': r = make_approx(a.approx + b.approx); break;
        case '-': r = make_approx(a.approx - b.approx); break;
        case '*': r = make_approx(a.approx * b.approx); break;
        default: r = make_approx(a.approx / b.approx); break;
      }
    }
    check_magnitude(r, op_pos);
    return r;
  }

  Value parse_expr() {
    Value v = parse_term();
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) return v;
      char op = s_[pos_];
      size_t op_pos = pos_;
      last_ = pos_++;
      Value rhs = parse_term();
      v = apply(op, v, rhs, op_pos);
    }
  }

  Value parse_term() {
    Value v = parse_unary();
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) return v;
      char op = s_[pos_];
      size_t op_pos = pos_;
      last_ = pos_++;
      Value rhs = parse_unary();
      v = apply(op, v, rhs, op_pos);
    }
  }

  Value parse_unary() {
    skip_ws();
    if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
      char sign = s_[pos_];
      last_ = pos_++;
      enter();
      Value v = parse_unary();
      --depth_;
      if (sign == '-') {
        if (v.num == INT64_MIN) {
          v.exact = false;  // -INT64_MIN does not fit; keep the approximation
        } else {
          v.num = -v.num;
        }
        v.approx = -v.approx;
      }
      return v;
    }
    return parse_primary();
  }

  Value parse_primary() {
    skip_ws();
    if (pos_ >= s_.size()) {
      fail("syntax", "expression ends after '" + char_at(s_, last_) + "' at position " +
                         pos_str(last_) + "; expected a number or '(' next");
    }
    char c = s_[pos_];
    if (c == '(') {
      size_t open = pos_;
      last_ = pos_++;
      enter();
      Value v = parse_expr();
      --depth_;
      skip_ws();
      if (pos_ >= s_.size()) {  // unreachable after the balance check; kept for safety
        fail("unbalanced", "unbalanced parentheses: '(' at position " + pos_str(open) +
                               " is never closed");
      }
      if (s_[pos_] != ')') {
        fail("syntax", "unexpected '" + char_at(s_, pos_) + "' at position " + pos_str(pos_) +
                           ": expected an operator (+ - * /) or ')'");
      }
      last_ = pos_++;
      return v;
    }
    if (is_digit(c) || c == '.') return parse_number();
    fail("syntax", "unexpected '" + char_at(s_, pos_) + "' at position " + pos_str(pos_) +
                       ": expected a number or '('");
  }

  Value parse_number() {
    size_t start = pos_;
    std::string int_digits, frac_digits;
    while (pos_ < s_.size() && is_digit(s_[pos_])) int_digits += s_[pos_++];
    bool has_point = false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      has_point = true;
      ++pos_;
      while (pos_ < s_.size() && is_digit(s_[pos_])) frac_digits += s_[pos_++];
    }
    last_ = pos_ - 1;
    if (int_digits.empty() && frac_digits.empty()) {
      fail("syntax", "malformed number '.' at position " + pos_str(start));
    }
    (void)has_point;
    // Strip leading zeros of the integer part and trailing zeros of the fraction:
    // they change neither the value nor its exactness.
    size_t nz = int_digits.find_first_not_of('0');
    std::string ip = nz == std::string::npos ? "" : int_digits.substr(nz);
    size_t lz = frac_digits.find_last_not_of('0');
    std::string fp = lz == std::string::npos ? "" : frac_digits.substr(0, lz + 1);
    std::string literal = s_.substr(start, pos_ - start);
    long double approx = std::strtold(("0" + literal).c_str(), nullptr);
    if (ip.size() > 18 || approx > static_cast<long double>(o_.max_abs)) {
      fail("too_large", "number " + literal.substr(0, 24) + (literal.size() > 24 ? "..." : "") +
                            " at position " + pos_str(start) + " is too large: numbers must be at most " +
                            format_limit(o_.max_abs));
    }
    if (ip.size() + fp.size() <= 18) {
      i128 n = 0;
      for (char d : ip + fp) n = n * 10 + (d - '0');
      i128 den = 1;
      for (size_t k = 0; k < fp.size(); ++k) den *= 10;
      return make_exact(n, den);
    }
    return make_approx(approx);
  }

  const std::string& s_;
  const CalcOptions& o_;
  size_t pos_ = 0;
  size_t last_ = 0;  // byte offset of the last consumed token (for "ends after" errors)
  int depth_ = 0;
};

// Increments the decimal digit string `digits` by one unit in the last place;
// returns true when the carry ran out of the front.
bool increment_digits(std::string& digits) {
  for (size_t i = digits.size(); i-- > 0;) {
    if (digits[i] == '9') {
      digits[i] = '0';
    } else {
      ++digits[i];
      return false;
    }
  }
  return true;
}

// Decimal text of num/den with at most `sig` significant digits after the integer part
// (the integer part is always shown in full). Sets *exact when nothing was rounded.
std::string format_rational(int64_t num, int64_t den, int sig, bool* exact) {
  bool neg = num < 0;
  u128 n = abs128(num);
  u128 d = static_cast<u128>(den);
  u128 ip = n / d;
  u128 r = n % d;
  std::string int_str = std::to_string(static_cast<uint64_t>(ip));
  std::string frac;
  int budget = ip > 0 ? sig - static_cast<int>(int_str.size()) : sig;
  int produced_sig = 0;
  const size_t kMaxFrac = 40;
  // Leading zeros of a pure fraction (0.000123) are not significant.
  while (r != 0 && frac.size() < kMaxFrac && produced_sig < budget) {
    r *= 10;
    char digit = static_cast<char>('0' + static_cast<int>(r / d));
    r %= d;
    frac += digit;
    if (ip > 0 || produced_sig > 0 || digit != '0') ++produced_sig;
  }
  *exact = (r == 0);
  if (r != 0 && 2 * r >= d) {  // round half away from zero
    if (increment_digits(frac)) {
      ++ip;
      int_str = std::to_string(static_cast<uint64_t>(ip));
    }
  }
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  std::string out = int_str;
  if (!frac.empty()) out += "." + frac;
  if (neg && out.find_first_not_of("0.") != std::string::npos) out = "-" + out;
  return out;
}

// Fixed-point text of an approximate value with about `sig` significant digits.
std::string format_approx(long double v, int sig) {
  if (v == 0) return "0";
  long double a = std::fabs(v);
  char buf[128];
  if (a < 1e-12L) {
    std::snprintf(buf, sizeof buf, "%.*Lg", sig, v);
    return buf;
  }
  int mag = static_cast<int>(std::floor(std::log10(a)));  // 10^mag <= a
  int decimals = sig - mag - 1;
  if (decimals < 0) decimals = 0;
  if (decimals > 30) decimals = 30;
  std::snprintf(buf, sizeof buf, "%.*Lf", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

CalcResult failure(const std::string& kind, const std::string& msg) {
  CalcResult r;
  r.ok = false;
  r.error_kind = kind;
  r.text = "Error: " + msg;
  return r;
}

}  // namespace

void CalcOptions::validate() const {
  AGENTR1_CHECK(max_length > 0, "calculator max_length must be >= 1, got 0");
  AGENTR1_CHECK(max_depth >= 1, "calculator max_depth must be >= 1, got " << max_depth);
  AGENTR1_CHECK(significant_digits >= 1 && significant_digits <= 18,
                "calculator significant_digits must be in 1..18, got " << significant_digits);
  AGENTR1_CHECK(max_abs > 0 && max_abs <= 1e18,
                "calculator max_abs must be in (0, 1e18] (exact values are 64-bit), got " << max_abs);
}

CalcOptions CalcOptions::from_json(const json& kwargs) {
  return bind_config<CalcOptions>(
      json{{"env_kwargs", {{"tool_kwargs", {{"calculator", kwargs.is_null() ? json::object() : kwargs}}}}}},
      "env_kwargs.tool_kwargs.calculator");
}

CalcResult evaluate_expression(const std::string& expr, const CalcOptions& opts) {
  opts.validate();

  size_t n_chars = char_count(expr);
  if (n_chars > opts.max_length) {
    return failure("too_long", "expression is " + std::to_string(n_chars) +
                                   " characters long; the limit is " +
                                   std::to_string(opts.max_length) + " characters");
  }
  if (expr.find_first_not_of(" \t\n\r") == std::string::npos) {
    return failure("empty", "empty expression; pass an arithmetic expression such as \"(12 + 30) * 4\"");
  }
  // 1. Characters.
  for (size_t i = 0; i < expr.size(); ++i) {
    if (!is_allowed(expr[i])) {
      std::string ch = char_at(expr, i);
      return failure("syntax", "unexpected character '" + ch + "' at position " +
                                   std::to_string(char_pos(expr, i)) + "; " + hint_for(ch));
    }
  }
  // 2. Parentheses: balance and depth.
  std::vector<size_t> open;
  size_t max_open = 0;
  for (size_t i = 0; i < expr.size(); ++i) {
    if (expr[i] == '(') {
      open.push_back(i);
      if (open.size() > max_open) max_open = open.size();
    } else if (expr[i] == ')') {
      if (open.empty()) {
        return failure("unbalanced", "unbalanced parentheses: ')' at position " +
                                         std::to_string(char_pos(expr, i)) + " has no matching '('");
      }
      open.pop_back();
    }
  }
  if (!open.empty()) {
    return failure("unbalanced", "unbalanced parentheses: '(' at position " +
                                     std::to_string(char_pos(expr, open.front())) +
                                     " is never closed" +
                                     (open.size() > 1 ? " (" + std::to_string(open.size()) +
                                                            " '(' are unclosed)"
                                                      : std::string()));
  }
  if (static_cast<int>(max_open) > opts.max_depth) {
    return failure("too_deep", "parentheses nested " + std::to_string(max_open) +
                                   " levels deep; the limit is " + std::to_string(opts.max_depth));
  }
  // 3. Grammar and arithmetic.
  Value v;
  try {
    Parser p(expr, opts);
    v = p.parse();
  } catch (const CalcFailure& f) {
    return failure(f.kind, f.message);
  }
  CalcResult r;
  r.ok = true;
  r.value = v.approx;
  if (v.exact) {
    r.text = format_rational(v.num, v.den, opts.significant_digits, &r.exact);
  } else {
    r.exact = false;
    r.text = format_approx(v.approx, opts.significant_digits);
  }
  return r;
}

Calculator::Calculator(CalcOptions opts) : opts_(opts) {
  // Validate once, at construction (evaluate_expression re-checks cheaply).
  evaluate_expression("0", opts_);
}

std::string Calculator::description() const {
  return "Evaluates an arithmetic expression with + - * / and parentheses and returns the "
         "exact result. Use it for every calculation.";
}

json Calculator::parameters() const {
  return json{{"type", "object"},
              {"properties",
               {{"expression",
                 {{"type", "string"},
                  {"description",
                   "The arithmetic expression to evaluate, e.g. \"(1234 + 567) * 3\". Numbers, "
                   "+ - * / and parentheses only."}}}}},
              {"required", json::array({"expression"})}};
}

env::ToolResult Calculator::execute(const json& args) {
  env::ToolResult out;
  auto error = [&](const std::string& kind, const std::string& msg) {
    out.text = "Error: " + msg;
    out.info = {{"error", true}, {"exact", false}, {"error_kind", kind}};
    return out;
  };
  if (!args.is_object()) {
    return error("argument", std::string("arguments must be a JSON object like "
                                         "{\"expression\": \"2 + 3\"}, got ") +
                                 args.type_name());
  }
  auto it = args.find("expression");
  if (it == args.end()) {
    return error("argument",
                 "missing required argument 'expression' (a string such as \"(12 + 30) * 4\")");
  }
  if (!it->is_string()) {
    return error("argument", std::string("argument 'expression' must be a string such as "
                                         "\"(12 + 30) * 4\", got ") +
                                 it->type_name() + " " + it->dump().substr(0, 40));
  }
  CalcResult r = evaluate_expression(it->get<std::string>(), opts_);
  out.text = r.text;
  if (r.ok) {
    out.info = {{"error", false}, {"exact", r.exact}};
  } else {
    out.info = {{"error", true}, {"exact", false}, {"error_kind", r.error_kind}};
  }
  return out;
}

}  // namespace agentr1::tasks
