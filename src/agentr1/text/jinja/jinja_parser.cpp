// Lexer and recursive-descent parser for the Jinja subset HF chat templates use,
// following jinja2 3.1's grammar and operator precedence:
//   condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary -/+ <
//   primary with postfix (.attr [item] (call)) and filters / tests (| name, is name).
#include "agentr1/text/jinja/jinja_parser.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

namespace agentr1::text::jinja {
namespace {

enum class Tok { kData, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // data, name, operator, decoded string
  Value value;       // int / float literal
  size_t pos = 0;    // offset in the (normalised) source
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string rstrip_ws(const std::string& s) {
  size_t e = s.size();
  while (e > 0 && is_ws(s[e - 1])) --e;
  return s.substr(0, e);
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t p = find_tag(pos);
      if (p == std::string::npos) {
        emit_data(src_.substr(pos), pos);
        break;
      }
      std::string text = src_.substr(pos, p - pos);
      const char kind = src_[p + 1];
      char sign = p + 2 < n && (src_[p + 2] == '-' || src_[p + 2] == '+') ? src_[p + 2] : 0;
      size_t raw_end = 0;
      const bool raw = kind == '%' && is_raw_begin(p, &raw_end);
      text = strip_before(text, sign, kind != '{', line_starting);
      emit_data(text, pos);
      if (raw) {
        // {% raw %}...{% endraw %}: the body is data, lstripped like any block.
        pos = raw_end;
        line_starting = src_[pos - 1] == '\n';
        size_t body_end = 0, after = 0;
        char end_sign = 0;
        if (!find_endraw(pos, &body_end, &after, &end_sign))
          fail(p, "missing end of raw directive ({% endraw %})");
        std::string body = strip_before(src_.substr(pos, body_end - pos), end_sign, true,
                                        line_starting);
        emit_data(body, pos);
        pos = after;
        line_starting = src_[pos - 1] == '\n';
        continue;
      }
      pos = p + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        const size_t q = src_.find("#}", pos);
        if (q == std::string::npos) fail(p, "missing end of comment tag (#})");
        char end_sign = q > pos && (src_[q - 1] == '-' || src_[q - 1] == '+') ? src_[q - 1] : 0;
        pos = q + 2;
        pos = after_end(pos, end_sign, /*block=*/true);
        line_starting = src_[pos - 1] == '\n';
        continue;
      }
      const bool block = kind == '%';
      tokens_.push_back(Token{block ? Tok::kBlockBegin : Tok::kVarBegin, "", {}, p});
      pos = lex_inside(pos, block, p);
      line_starting = src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{Tok::kEof, "", {}, n});
    return std::move(tokens_);
  }

  [[noreturn]] void fail(size_t pos, const std::string& what) const;

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  size_t skip_ws(size_t i) const {
    while (i < src_.size() && is_ws(src_[i])) ++i;
    return i;
  }

  // {%[-+]?\s*raw\s*(-%}\s*|%})
  bool is_raw_begin(size_t p, size_t* end) const {
    size_t i = p + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_ws(i);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_ws(i + 3);
    if (src_.compare(i, 3, "-%}") == 0) {
      *end = skip_ws(i + 3);
      return true;
    }
    if (src_.compare(i, 2, "%}") == 0) {
      *end = i + 2;
      return true;
    }
    return false;
  }

  bool find_endraw(size_t from, size_t* body_end, size_t* after, char* sign) const {
    for (size_t i = src_.find("{%", from); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      char s = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) s = src_[j++];
      j = skip_ws(j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_ws(j + 6);
      char es = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) es = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      *body_end = i;
      *sign = s;
      *after = after_end(j + 2, es, true);
      return true;
    }
    return false;
  }

  // After a tag's closing delimiter: "-" eats all whitespace, trim_blocks eats one
  // newline after block and comment tags, "+" keeps everything.
  size_t after_end(size_t pos, char end_sign, bool block) const {
    if (end_sign == '-') return skip_ws(pos);
    if (end_sign == '+' || !block) return pos;
    if (pos < src_.size() && src_[pos] == '\n') return pos + 1;
    return pos;
  }

  // The data before a tag: "-" strips all trailing whitespace; lstrip_blocks strips
  // the spaces and tabs between the last line start and a block or comment tag.
  static std::string strip_before(const std::string& text, char sign, bool lstrip_applies,
                                  bool line_starting) {
    if (sign == '-') return rstrip_ws(text);
    if (sign == '+' || !lstrip_applies) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting) {
      bool all_ws = l_pos < text.size();
      for (size_t i = l_pos; i < text.size() && all_ws; ++i) all_ws = is_ws(text[i]);
      if (all_ws) return text.substr(0, l_pos);
    }
    return text;
  }

  void emit_data(const std::string& text, size_t pos) {
    if (!text.empty()) tokens_.push_back(Token{Tok::kData, text, {}, pos});
  }

  size_t lex_inside(size_t pos, bool block, size_t tag_pos) {
    int depth = 0;
    const size_t n = src_.size();
    while (true) {
      pos = skip_ws(pos);
      if (pos >= n) fail(tag_pos, block ? "unexpected end of template inside a {% ... %} tag"
                                        : "unexpected end of template inside a {{ ... }} tag");
      if (depth == 0) {
        if (block) {
          if (src_.compare(pos, 3, "+%}") == 0 || src_.compare(pos, 3, "-%}") == 0) {
            tokens_.push_back(Token{Tok::kBlockEnd, "", {}, pos});
            return after_end(pos + 3, src_[pos], true);
          }
          if (src_.compare(pos, 2, "%}") == 0) {
            tokens_.push_back(Token{Tok::kBlockEnd, "", {}, pos});
            return after_end(pos + 2, 0, true);
          }
        } else {
          if (src_.compare(pos, 3, "-}}") == 0) {
            tokens_.push_back(Token{Tok::kVarEnd, "", {}, pos});
            return skip_ws(pos + 3);
          }
          if (src_.compare(pos, 2, "}}") == 0) {
            tokens_.push_back(Token{Tok::kVarEnd, "", {}, pos});
            return pos + 2;
          }
        }
      }
      const char c = src_[pos];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        pos = lex_number(pos);
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < n && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        tokens_.push_back(Token{Tok::kName, src_.substr(pos, e - pos), {}, pos});
        pos = e;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos);
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*",
                                     "%",  "~",  "[",  "]",  "(",  ")",  "{", "}", ">", "<",
                                     "=",  ".",  ":",  "|",  ",",  ";"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(pos, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) fail(pos, std::string("unexpected character '") + c + "'");
        const std::string s = op;
        if (s == "(" || s == "[" || s == "{") ++depth;
        if (s == ")" || s == "]" || s == "}") {
          if (depth == 0) fail(pos, "unexpected '" + s + "'");
          --depth;
        }
        tokens_.push_back(Token{Tok::kOp, s, {}, pos});
        pos += s.size();
      }
    }
  }

  size_t lex_number(size_t pos) {
    const size_t n = src_.size();
    auto digits = [&](size_t i) {
      const size_t b = i;
      while (i < n && (std::isdigit(static_cast<unsigned char>(src_[i])) ||
                       (src_[i] == '_' && i > b && i + 1 < n &&
                        std::isdigit(static_cast<unsigned char>(src_[i + 1])))))
        ++i;
      return i;
    };
    auto clean = [](std::string s) {
      std::string o;
      for (char c : s)
        if (c != '_') o += c;
      return o;
    };
    size_t e = digits(pos);
    bool is_float = false;
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    if (!after_dot) {
      size_t f = e;
      if (f + 1 < n && src_[f] == '.' && std::isdigit(static_cast<unsigned char>(src_[f + 1]))) {
        f = digits(f + 1);
        is_float = true;
      }
      if (f < n && (src_[f] == 'e' || src_[f] == 'E')) {
        size_t g = f + 1;
        if (g < n && (src_[g] == '+' || src_[g] == '-')) ++g;
        if (g < n && std::isdigit(static_cast<unsigned char>(src_[g]))) {
          f = digits(g);
          is_float = true;
        }
      }
      if (is_float) e = f;
    }
    const std::string text = clean(src_.substr(pos, e - pos));
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, {}, pos};
    if (is_float) {
      t.value = Value(std::stod(text));
    } else {
      try {
        t.value = Value(static_cast<std::int64_t>(std::stoll(text)));
      } catch (const std::exception&) {
        fail(pos, "integer literal " + text + " is out of range");
      }
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  size_t lex_string(size_t pos) {
    const char q = src_[pos];
    size_t i = pos + 1;
    std::string out;
    while (true) {
      if (i >= src_.size()) fail(pos, "unterminated string literal");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail(pos, "unterminated string literal");
      const char e = src_[i + 1];
      i += 2;
      auto hex = [&](int len) {
        char32_t cp = 0;
        for (int k = 0; k < len; ++k) {
          if (i >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[i])))
            fail(pos, "truncated \\x/\\u escape in string literal");
          cp = cp * 16 + static_cast<char32_t>(std::stoi(std::string(1, src_[i]), nullptr, 16));
          ++i;
        }
        utf8_append(out, cp);
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k)
              cp = cp * 8 + static_cast<char32_t>(src_[i++] - '0');
            utf8_append(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(Token{Tok::kString, out, {}, pos});
    return i + 1;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
};

}  // namespace

std::string line_col(const std::string& src, size_t pos) {
  int line = 1, col = 1;
  for (size_t i = 0; i < pos && i < src.size(); ++i) {
    if (src[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

namespace {

void Lexer::fail(size_t pos, const std::string& what) const {
  throw Error("jinja syntax error at " + line_col(src_, pos) + ": " + what);
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kData: return "template data";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "end of statement block ('%}')";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "end of print statement ('}}')";
    case Tok::kName: return "'" + t.text + "'";
    case Tok::kString: return "string literal";
    case Tok::kInt: return "integer " + t.text;
    case Tok::kFloat: return "float " + t.text;
    case Tok::kOp: return "'" + t.text + "'";
    case Tok::kEof: return "end of template";
  }
  return "?";
}

constexpr int kMaxNesting = 200;

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> tokens) : src_(src), toks_(std::move(tokens)) {}

  Body parse_all() {
    Body body = subparse({});
    if (cur().type != Tok::kEof) fail("unexpected tag");
    return body;
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& advance() { return toks_[i_ < toks_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }

  [[noreturn]] void fail(const std::string& what) const {
    std::string where = construct_.empty() ? "" : " (in '" + construct_.back() + "' tag)";
    throw Error("jinja syntax error at " + line_col(src_, cur().pos) + where + ": " + what);
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    advance();
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) fail("expected end of statement block ('%}'), got " + describe(cur()));
    advance();
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) fail("expected a name, got " + describe(cur()));
    return advance().text;
  }

  template <class T>
  std::unique_ptr<T> node(typename T::Type type) {
    auto n = std::make_unique<T>();
    n->type = type;
    n->pos = cur().pos;
    return n;
  }
  ExprPtr expr_node(Expr::Type type, size_t pos) {
    auto n = std::make_unique<Expr>();
    n->type = type;
    n->pos = pos;
    return n;
  }

  // ---- statements

  Body subparse(const std::set<std::string>& end_tags) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::kEof) {
        if (!end_tags.empty()) {
          std::string want;
          for (const auto& e : end_tags) want += (want.empty() ? "'" : " or '") + e + "'";
          fail("unexpected end of template; looking for " + want +
               (construct_.empty() ? "" : " to close '" + construct_.back() + "'"));
        }
        return body;
      }
      if (t.type == Tok::kData) {
        auto s = node<Stmt>(Stmt::kText);
        s->text = advance().text;
        body.push_back(std::move(s));
      } else if (t.type == Tok::kVarBegin) {
        advance();
        auto s = node<Stmt>(Stmt::kOutput);
        s->expr = parse_tuple(true, false, {});
        if (cur().type != Tok::kVarEnd) fail("expected end of print statement ('}}'), got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.type == Tok::kBlockBegin) {
        advance();
        if (cur().type != Tok::kName) fail("expected a statement name after '{%', got " + describe(cur()));
        if (end_tags.count(cur().text)) return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    const std::string tag = cur().text;
    if (++depth_ > kMaxNesting) fail("statements nested deeper than " + std::to_string(kMaxNesting));
    construct_.push_back(tag);
    StmtPtr s;
    if (tag == "if") s = parse_if();
    else if (tag == "for") s = parse_for();
    else if (tag == "set") s = parse_set();
    else if (tag == "macro") s = parse_macro();
    else if (tag == "filter") s = parse_filter_block();
    else if (tag == "break" || tag == "continue") {
      s = node<Stmt>(tag == "break" ? Stmt::kBreak : Stmt::kContinue);
      advance();
      if (loops_ == 0) fail("'" + tag + "' outside of a for loop");
      expect_block_end();
    } else if (tag == "generation") {
      s = node<Stmt>(Stmt::kScope);
      advance();
      expect_block_end();
      s->body = subparse({"endgeneration"});
      advance();
      expect_block_end();
    } else if (tag == "with") {
      s = parse_with();
    } else {
      construct_.pop_back();
      fail("unknown or unsupported tag '" + tag + "'");
    }
    construct_.pop_back();
    --depth_;
    return s;
  }

  StmtPtr parse_if() {
    auto s = node<Stmt>(Stmt::kIf);
    advance();
    while (true) {
      s->conds.push_back(parse_tuple(false, false, {}));
      expect_block_end();
      s->bodies.push_back(subparse({"elif", "else", "endif"}));
      const std::string t = advance().text;
      if (t == "elif") continue;
      if (t == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
        advance();
      }
      break;
    }
    expect_block_end();
    return s;
  }

  Target parse_target(bool allow_ns, bool allow_tuple) {
    Target t;
    if (is_op("(")) {
      advance();
      t = parse_target(false, true);
      expect_op(")");
    } else {
      t.name = expect_name();
      if (t.name == "true" || t.name == "false" || t.name == "none" || t.name == "True" ||
          t.name == "False" || t.name == "None")
        fail("cannot assign to '" + t.name + "'");
      if (allow_ns && is_op(".")) {
        advance();
        t.attr = expect_name();
        return t;
      }
    }
    if (allow_tuple && is_op(",")) {
      Target tup;
      tup.is_tuple = true;
      tup.items.push_back(std::move(t));
      while (is_op(",")) {
        advance();
        if (cur().type != Tok::kName && !is_op("(")) break;
        if (is_name("in")) break;
        tup.items.push_back(parse_target(false, false));
      }
      return tup;
    }
    return t;
  }

  StmtPtr parse_for() {
    auto s = node<Stmt>(Stmt::kFor);
    advance();
    s->target = parse_target(false, true);
    if (!is_name("in")) fail("expected 'in' after the loop variable, got " + describe(cur()));
    advance();
    s->expr = parse_tuple(false, false, {"recursive"});
    if (is_name("if")) {
      advance();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    ++loops_;
    s->body = subparse({"endfor", "else"});
    --loops_;
    if (advance().text == "else") {
      expect_block_end();
      s->else_body = subparse({"endfor"});
      advance();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    auto s = node<Stmt>(Stmt::kSet);
    advance();
    s->target = parse_target(true, true);
    if (is_op("=")) {
      advance();
      s->expr = parse_tuple(true, false, {});
      expect_block_end();
      return s;
    }
    s->type = Stmt::kSetBlock;
    if (!s->target.attr.empty() || s->target.is_tuple) fail("a block set assigns to one name");
    parse_filter_chain(s->filters);
    expect_block_end();
    s->body = subparse({"endset"});
    advance();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro() {
    auto s = node<Stmt>(Stmt::kMacro);
    advance();
    s->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        advance();
        p.default_value = parse_expression(true);
      } else if (!s->params.empty() && s->params.back().default_value) {
        fail("parameter '" + p.name + "' without a default follows one with a default");
      }
      s->params.push_back(std::move(p));
    }
    advance();
    expect_block_end();
    const int saved_loops = loops_;
    loops_ = 0;
    s->body = subparse({"endmacro"});
    loops_ = saved_loops;
    advance();
    if (cur().type == Tok::kName) advance();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = node<Stmt>(Stmt::kFilterBlock);
    advance();
    if (cur().type != Tok::kName) fail("expected a filter name, got " + describe(cur()));
    s->filters.push_back(parse_filter_call(nullptr));
    parse_filter_chain(s->filters);
    expect_block_end();
    s->body = subparse({"endfilter"});
    advance();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = node<Stmt>(Stmt::kScope);
    advance();
    while (cur().type != Tok::kBlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_target(false, false);
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression(true));
    }
    expect_block_end();
    s->body = subparse({"endwith"});
    advance();
    expect_block_end();
    return s;
  }

  void parse_filter_chain(std::vector<ExprPtr>& filters) {
    while (is_op("|")) {
      advance();
      filters.push_back(parse_filter_call(nullptr));
    }
  }

  // ---- expressions

  struct Depth {
    explicit Depth(Parser* p) : p(p) {
      if (++p->depth_ > kMaxNesting)
        p->fail("expression nested deeper than " + std::to_string(kMaxNesting));
    }
    ~Depth() { --p->depth_; }
    Parser* p;
  };

  bool is_tuple_end(const std::set<std::string>& extra) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEof) return true;
    if (t.type == Tok::kOp && t.text == ")") return true;
    return t.type == Tok::kName && extra.count(t.text);
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const std::set<std::string>& extra) {
    const size_t pos = cur().pos;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      args.push_back(with_condexpr ? parse_expression(true) : parse_or());
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
    }
    auto t = expr_node(Expr::kTuple, pos);
    t->args = std::move(args);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Depth d(this);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      auto c = expr_node(Expr::kCondExpr, cur().pos);
      advance();
      c->args.push_back(parse_or());
      c->args.push_back(std::move(e));
      if (is_name("else")) {
        advance();
        c->args.push_back(parse_expression(true));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, size_t pos) {
    auto b = expr_node(Expr::kBinary, pos);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const size_t pos = advance().pos;
      l = binary("or", std::move(l), parse_and(), pos);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const size_t pos = advance().pos;
      l = binary("and", std::move(l), parse_not(), pos);
    }
    return l;
  }
  ExprPtr parse_not() {
    Depth d(this);
    if (is_name("not")) {
      auto u = expr_node(Expr::kUnary, advance().pos);
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const size_t pos = cur().pos;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = advance().text;
      } else if (is_name("in")) {
        advance();
        op = "in";
      } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
        advance();
        advance();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = expr_node(Expr::kCompare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = advance();
      l = binary(t.text, std::move(l), parse_concat(), t.pos);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const size_t pos = advance().pos;
      l = binary("~", std::move(l), parse_math2(), pos);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = advance();
      l = binary(t.text, std::move(l), parse_pow(), t.pos);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const size_t pos = advance().pos;
      l = binary("**", std::move(l), parse_unary(true), pos);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    Depth d(this);
    ExprPtr n;
    if (is_op("-") || is_op("+")) {
      auto u = expr_node(Expr::kUnary, cur().pos);
      u->name = advance().text;
      u->args.push_back(parse_unary(false));
      n = std::move(u);
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const size_t pos = t.pos;
    if (t.type == Tok::kName) {
      const std::string name = advance().text;
      auto c = expr_node(Expr::kConst, pos);
      if (name == "true" || name == "True") c->value = Value(true);
      else if (name == "false" || name == "False") c->value = Value(false);
      else if (name == "none" || name == "None") c->value = Value::none();
      else {
        c->type = Expr::kName;
        c->name = name;
      }
      return c;
    }
    if (t.type == Tok::kString) {
      std::string s = advance().text;
      while (cur().type == Tok::kString) s += advance().text;
      auto c = expr_node(Expr::kConst, pos);
      c->value = Value(std::move(s));
      return c;
    }
    if (t.type == Tok::kInt || t.type == Tok::kFloat) {
      auto c = expr_node(Expr::kConst, pos);
      c->value = advance().value;
      return c;
    }
    if (is_op("(")) {
      advance();
      ExprPtr e = parse_tuple(true, true, {});
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      advance();
      auto l = expr_node(Expr::kList, pos);
      while (!is_op("]")) {
        if (!l->args.empty()) expect_op(",");
        if (is_op("]")) break;
        l->args.push_back(parse_expression(true));
      }
      advance();
      return l;
    }
    if (is_op("{")) {
      advance();
      auto d = expr_node(Expr::kDict, pos);
      while (!is_op("}")) {
        if (!d->args.empty()) expect_op(",");
        if (is_op("}")) break;
        d->args.push_back(parse_expression(true));
        expect_op(":");
        d->args.push_back(parse_expression(true));
      }
      advance();
      return d;
    }
    fail("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr n) {
    while (true) {
      if (is_op(".")) {
        const size_t pos = advance().pos;
        if (cur().type == Tok::kName) {
          auto a = expr_node(Expr::kAttr, pos);
          a->name = advance().text;
          a->args.push_back(std::move(n));
          n = std::move(a);
        } else if (cur().type == Tok::kInt) {
          auto a = expr_node(Expr::kItem, pos);
          a->args.push_back(std::move(n));
          auto c = expr_node(Expr::kConst, pos);
          c->value = advance().value;
          a->args.push_back(std::move(c));
          n = std::move(a);
        } else {
          fail("expected an attribute name after '.', got " + describe(cur()));
        }
      } else if (is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr n) {
    const size_t pos = advance().pos;  // '['
    std::vector<ExprPtr> parts;
    bool any_slice = false;
    std::vector<ExprPtr> tuple_items;
    while (true) {
      if (!tuple_items.empty() || !parts.empty()) {
        if (!is_op(",")) break;
        advance();
        if (is_op("]")) break;
      }
      // one subscript: expr, or [a]:[b][:[c]]
      ExprPtr start, stop, step;
      bool slice = false;
      if (!is_op(":")) start = parse_expression(true);
      if (is_op(":")) {
        slice = true;
        advance();
        if (!is_op("]") && !is_op(",") && !is_op(":")) stop = parse_expression(true);
        if (is_op(":")) {
          advance();
          if (!is_op("]") && !is_op(",")) step = parse_expression(true);
        }
      }
      if (slice) {
        if (any_slice || !tuple_items.empty() || !parts.empty()) fail("multi-dimensional slices are not supported");
        any_slice = true;
        parts.push_back(std::move(start));
        parts.push_back(std::move(stop));
        parts.push_back(std::move(step));
      } else {
        if (any_slice) fail("multi-dimensional slices are not supported");
        tuple_items.push_back(std::move(start));
      }
      if (!is_op(",")) break;
    }
    expect_op("]");
    if (any_slice) {
      auto s = expr_node(Expr::kSlice, pos);
      s->args.push_back(std::move(n));
      for (auto& p : parts) s->args.push_back(std::move(p));
      return s;
    }
    auto it = expr_node(Expr::kItem, pos);
    it->args.push_back(std::move(n));
    if (tuple_items.size() == 1) {
      it->args.push_back(std::move(tuple_items[0]));
    } else {
      auto t = expr_node(Expr::kTuple, pos);
      t->args = std::move(tuple_items);
      it->args.push_back(std::move(t));
    }
    return it;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
        std::string key = advance().text;
        advance();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) fail("positional argument follows keyword argument");
        call.args.push_back(parse_expression(true));
      }
    }
    advance();
  }

  ExprPtr parse_call(ExprPtr n) {
    auto c = expr_node(Expr::kCall, cur().pos);
    c->args.push_back(std::move(n));
    parse_call_args(*c);
    return c;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().type == Tok::kName) {
      advance();
      name += "." + advance().text;
    }
    return name;
  }

  // |name or |name(args); input may be null (filter blocks, block set).
  ExprPtr parse_filter_call(ExprPtr input) {
    auto f = expr_node(Expr::kFilter, cur().pos);
    f->name = dotted_name();
    f->args.push_back(std::move(input));
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr n) {
    while (true) {
      if (is_op("|")) {
        advance();
        n = parse_filter_call(std::move(n));
      } else if (is_name("is")) {
        auto t = expr_node(Expr::kTest, advance().pos);
        if (is_name("not")) {
          advance();
          t->negated = true;
        }
        t->name = dotted_name();
        t->args.push_back(std::move(n));
        const Token& c = cur();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt ||
                    c.type == Tok::kFloat || is_op("[") || is_op("{")) &&
                   !(c.type == Tok::kName &&
                     (c.text == "else" || c.text == "or" || c.text == "and"))) {
          if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        n = std::move(t);
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  const std::string& src_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
  std::vector<std::string> construct_;
};

}  // namespace

ParsedTemplate parse_template(const std::string& source) {
  // Newlines normalised to "\n" and a single trailing newline dropped
  // (keep_trailing_newline=False), as jinja2's lexer does.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  ParsedTemplate out;
  out.source = std::move(src);
  Lexer lexer(out.source);
  std::vector<Token> tokens = lexer.run();
  Parser parser(out.source, std::move(tokens));
  out.body = parser.parse_all();
  return out;
}

}  // namespace agentr1::text::jinja
