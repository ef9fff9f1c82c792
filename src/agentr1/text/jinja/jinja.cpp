// The tree-walking evaluator. Scoping follows jinja2: {% if %} shares its scope, each
// for-loop iteration and each macro call gets a fresh child scope (so `set` inside a
// loop does not leak out; namespace() is how templates carry state across turns).
#include "agentr1/text/jinja/jinja.h"

#include "agentr1/text/jinja/jinja_builtins.h"
#include "agentr1/text/jinja/jinja_parser.h"

namespace agentr1::text::jinja {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (auto it = s->vars.rbegin(); it != s->vars.rend(); ++it)
        if (it->first == name) return &it->second;
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& kv : vars) {
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

class Loop : public Object {
 public:
  Loop(std::shared_ptr<const List> items, size_t index) : items_(std::move(items)), i_(index) {}
  Value attr(const std::string& name) const override {
    const auto n = static_cast<std::int64_t>(items_->size());
    const auto i = static_cast<std::int64_t>(i_);
    if (name == "index") return Value(i + 1);
    if (name == "index0") return Value(i);
    if (name == "revindex") return Value(n - i);
    if (name == "revindex0") return Value(n - i - 1);
    if (name == "first") return Value(i == 0);
    if (name == "last") return Value(i == n - 1);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(1);
    if (name == "depth0") return Value(0);
    if (name == "previtem") return i > 0 ? (*items_)[i_ - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem") return i + 1 < n ? (*items_)[i_ + 1] : Value::undefined("there is no next item");
    if (name == "cycle") {
      const size_t idx = i_;
      return Value::function("cycle", [idx](CallArgs& a) -> Value {
        if (a.pos.empty()) throw RenderError("TypeError: no items for cycling given");
        return a.pos[idx % a.pos.size()];
      });
    }
    return Object::attr(name);
  }
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(i_ + 1) + "/" + std::to_string(items_->size()) + ">";
  }

 private:
  std::shared_ptr<const List> items_;
  size_t i_;
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const ParsedTemplate& t, const RenderLimits& limits) : t_(t), limits_(limits) {}

  void run(const ScopePtr& scope, std::string& out) {
    out_ = &out;
    exec(t_.body, scope);
  }

 private:
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    throw RenderError(what + " (template " + line_col(t_.source, pos) + ")");
  }

  void emit(const std::string& s) {
    out_->append(s);
    check_size();
  }
  void check_size() const {
    if (out_->size() > limits_.max_output_bytes)
      throw RenderError("template output exceeds " + std::to_string(limits_.max_output_bytes) +
                        " bytes (runaway template?)");
  }

  std::string capture(const Body& body, const ScopePtr& scope) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    try {
      exec(body, scope);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  Flow exec(const Body& body, const ScopePtr& scope) {
    for (const StmtPtr& s : body) {
      const Flow f = exec_one(*s, scope);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec_one(const Stmt& s, const ScopePtr& scope) {
    switch (s.type) {
      case Stmt::kText:
        emit(s.text);
        return Flow::kNormal;
      case Stmt::kOutput: {
        const Value v = eval(*s.expr, *scope);
        v.str_into(*out_);
        check_size();
        return Flow::kNormal;
      }
      case Stmt::kIf:
        for (size_t i = 0; i < s.conds.size(); ++i)
          if (eval(*s.conds[i], *scope).truthy()) return exec(s.bodies[i], scope);
        return exec(s.else_body, scope);
      case Stmt::kFor:
        return exec_for(s, scope);
      case Stmt::kSet:
        assign(s.target, eval(*s.expr, *scope), *scope, s.pos);
        return Flow::kNormal;
      case Stmt::kSetBlock: {
        Value v(capture(s.body, scope));
        for (const ExprPtr& f : s.filters) v = apply_filter(*f, v, *scope);
        assign(s.target, v, *scope, s.pos);
        return Flow::kNormal;
      }
      case Stmt::kMacro:
        scope->set(s.name, make_macro(s, scope));
        return Flow::kNormal;
      case Stmt::kFilterBlock: {
        Value v(capture(s.body, scope));
        for (const ExprPtr& f : s.filters) v = apply_filter(*f, v, *scope);
        v.str_into(*out_);
        check_size();
        return Flow::kNormal;
      }
      case Stmt::kBreak:
        return Flow::kBreak;
      case Stmt::kContinue:
        return Flow::kContinue;
      case Stmt::kScope: {
        ScopePtr inner = child(scope);
        for (const auto& a : s.assigns) assign(a.first, eval(*a.second, *scope), *inner, s.pos);
        return exec(s.body, inner);
      }
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Stmt& s, const ScopePtr& scope) {
    const Value iterable = eval(*s.expr, *scope);
    List items;
    try {
      items = iterable.iterate();
    } catch (const RenderError& e) {
      fail_at(s.expr->pos, e.what());
    }
    if (s.cond) {
      List kept;
      for (Value& item : items) {
        ScopePtr probe = child(scope);
        assign(s.target, item, *probe, s.pos);
        if (eval(*s.cond, *probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(s.else_body, child(scope));
    auto shared = std::make_shared<const List>(std::move(items));
    for (size_t i = 0; i < shared->size(); ++i) {
      ScopePtr iter = child(scope);
      assign(s.target, (*shared)[i], *iter, s.pos);
      iter->set("loop", Value::object(std::make_shared<Loop>(shared, i)));
      const Flow f = exec(s.body, iter);
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void assign(const Target& t, const Value& v, Scope& scope, size_t pos) {
    if (!t.attr.empty()) {
      const Value* ns = scope.find(t.name);
      Namespace* obj = ns && ns->kind() == Kind::kObject ? dynamic_cast<Namespace*>(ns->as_object()) : nullptr;
      if (!obj) fail_at(pos, "TemplateRuntimeError: cannot assign attribute on non-namespace object");
      obj->set(t.attr, v);
      return;
    }
    if (!t.is_tuple) {
      scope.set(t.name, v);
      return;
    }
    List items;
    try {
      items = v.iterate();
    } catch (const RenderError&) {
      fail_at(pos, "TypeError: cannot unpack non-iterable " + v.type_name() + " object");
    }
    if (items.size() != t.items.size()) {
      fail_at(pos, items.size() < t.items.size()
                       ? "ValueError: not enough values to unpack (expected " + std::to_string(t.items.size()) +
                             ", got " + std::to_string(items.size()) + ")"
                       : "ValueError: too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
    }
    for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], scope, pos);
  }

  Value make_macro(const Stmt& s, const ScopePtr& def_scope) {
    const Stmt* macro = &s;
    Renderer* self = this;
    std::weak_ptr<Scope> weak = def_scope;
    return Value::function(s.name, [macro, self, weak](CallArgs& a) -> Value {
      ScopePtr def = weak.lock();
      if (!def) throw RenderError("macro '" + macro->name + "' called after its scope ended");
      return self->call_macro(*macro, def, a);
    });
  }

  Value call_macro(const Stmt& m, const ScopePtr& def_scope, CallArgs& a) {
    if (++depth_ > limits_.max_call_depth) {
      --depth_;
      fail_at(m.pos, "macro '" + m.name + "' recursed deeper than " + std::to_string(limits_.max_call_depth) +
                         " calls (runaway template?)");
    }
    struct Guard {
      int* d;
      ~Guard() { --*d; }
    } guard{&depth_};
    if (a.pos.size() > m.params.size())
      fail_at(m.pos, "TypeError: macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) +
                         " argument(s)");
    ScopePtr scope = child(def_scope);
    std::vector<bool> bound(m.params.size(), false);
    for (size_t i = 0; i < a.pos.size(); ++i) {
      scope->set(m.params[i].name, a.pos[i]);
      bound[i] = true;
    }
    for (const auto& kv : a.kw) {
      bool found = false;
      for (size_t i = 0; i < m.params.size(); ++i) {
        if (m.params[i].name != kv.first) continue;
        if (bound[i]) fail_at(m.pos, "TypeError: macro '" + m.name + "' got multiple values for argument '" + kv.first + "'");
        scope->set(kv.first, kv.second);
        bound[i] = found = true;
      }
      if (!found) fail_at(m.pos, "TypeError: macro '" + m.name + "' takes no keyword argument '" + kv.first + "'");
    }
    for (size_t i = 0; i < m.params.size(); ++i) {
      if (bound[i]) continue;
      scope->set(m.params[i].name, m.params[i].default_value ? eval(*m.params[i].default_value, *scope)
                                                              : Value::undefined(m.params[i].name));
    }
    return Value(capture(m.body, scope));
  }

  void call_args(const Expr& e, size_t first, Scope& scope, CallArgs& out) {
    for (size_t i = first; i < e.args.size(); ++i) out.pos.push_back(eval(*e.args[i], scope));
    for (const auto& kv : e.kwargs) out.kw.emplace_back(kv.first, eval(*kv.second, scope));
  }

  Value apply_filter(const Expr& f, const Value& input, Scope& scope) {
    FilterFn fn = find_filter(f.name);
    if (!fn) fail_at(f.pos, "no filter named '" + f.name + "'");
    CallArgs args;
    call_args(f, 1, scope, args);
    try {
      return fn(input, args);
    } catch (const RenderError& e) {
      if (e.raised_by_template) throw;
      fail_at(f.pos, std::string(e.what()) + " in filter '" + f.name + "'");
    }
  }

  Value eval(const Expr& e, Scope& scope) {
    switch (e.type) {
      case Expr::kConst:
        return e.value;
      case Expr::kName: {
        if (const Value* v = scope.find(e.name)) return *v;
        return find_global(e.name);
      }
      case Expr::kList:
      case Expr::kTuple: {
        List items;
        items.reserve(e.args.size());
        for (const ExprPtr& a : e.args) items.push_back(eval(*a, scope));
        return Value::list(std::move(items), e.type == Expr::kTuple);
      }
      case Expr::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i], scope);
          if (k.is_list() && !k.is_tuple()) fail_at(e.pos, "TypeError: unhashable type: 'list'");
          if (k.is_dict()) fail_at(e.pos, "TypeError: unhashable type: 'dict'");
          d.set(std::move(k), eval(*e.args[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case Expr::kAttr:
        return guarded(e, [&] { return get_attr(eval(*e.args[0], scope), e.name); });
      case Expr::kItem:
        return guarded(e, [&] {
          const Value obj = eval(*e.args[0], scope);
          return get_item(obj, eval(*e.args[1], scope));
        });
      case Expr::kSlice:
        return guarded(e, [&] {
          const Value obj = eval(*e.args[0], scope);
          auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value(); };
          return get_slice(obj, part(1), part(2), part(3));
        });
      case Expr::kCall: {
        const Value fn = eval(*e.args[0], scope);
        CallArgs args;
        call_args(e, 1, scope, args);
        if (fn.is_undefined()) guarded(e, [&]() -> Value { fn.raise_undefined(); });
        if (fn.kind() != Kind::kFunction) fail_at(e.pos, "TypeError: '" + fn.type_name() + "' object is not callable");
        try {
          return fn.as_function()(args);
        } catch (const RenderError& err) {
          if (err.raised_by_template || std::string(err.what()).find("(template line") != std::string::npos) throw;
          fail_at(e.pos, std::string(err.what()) + " in call to '" + fn.function_name() + "'");
        }
      }
      case Expr::kFilter:
        return apply_filter(e, eval(*e.args[0], scope), scope);
      case Expr::kTest: {
        TestFn fn = find_test(e.name);
        if (!fn) fail_at(e.pos, "no test named '" + e.name + "'");
        const Value v = eval(*e.args[0], scope);
        CallArgs args;
        call_args(e, 1, scope, args);
        const bool r = guarded(e, [&] { return Value(fn(v, args)); }).as_bool();
        return Value(e.negated ? !r : r);
      }
      case Expr::kUnary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value(!v.truthy());
        return guarded(e, [&]() -> Value {
          if (v.is_undefined()) v.raise_undefined();
          if (v.kind() == Kind::kFloat) return e.name == "-" ? Value(-v.as_double()) : v;
          if (v.is_number()) return e.name == "-" ? Value(-v.as_int()) : Value(v.as_int());
          throw RenderError("TypeError: bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        });
      }
      case Expr::kBinary: {
        if (e.name == "and") {
          Value l = eval(*e.args[0], scope);
          return l.truthy() ? eval(*e.args[1], scope) : l;
        }
        if (e.name == "or") {
          Value l = eval(*e.args[0], scope);
          return l.truthy() ? l : eval(*e.args[1], scope);
        }
        const Value l = eval(*e.args[0], scope);
        const Value r = eval(*e.args[1], scope);
        return guarded(e, [&] { return binary_op(e.name, l, r); });
      }
      case Expr::kCompare: {
        Value left = eval(*e.args[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1], scope);
          const std::string& op = e.ops[i];
          const bool ok = guarded(e, [&] {
                            bool r;
                            if (op == "==") r = equal(left, right);
                            else if (op == "!=") r = !equal(left, right);
                            else if (op == "<") r = less(left, right);
                            else if (op == ">") r = less(right, left);
                            else if (op == "<=") r = less(left, right) || equal(left, right);
                            else if (op == ">=") r = less(right, left) || equal(left, right);
                            else if (op == "in") r = contains(right, left);
                            else r = !contains(right, left);
                            return Value(r);
                          }).as_bool();
          if (!ok) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::kCondExpr:
        if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined("the inline if-expression on " + line_col(t_.source, e.pos) + " evaluated to false and no else section was defined.");
    }
    return Value();
  }

  // Runs f, adding the template position to errors that do not have one yet.
  template <class F>
  Value guarded(const Expr& e, F&& f) {
    try {
      return f();
    } catch (const RenderError& err) {
      if (err.raised_by_template || std::string(err.what()).find("(template line") != std::string::npos) throw;
      fail_at(e.pos, err.what());
    }
  }

  const ParsedTemplate& t_;
  const RenderLimits& limits_;
  std::string* out_ = nullptr;
  int depth_ = 0;
};

// Reports unknown filters and tests at parse time, as jinja2 does when compiling.
void check_names(const Expr* e, const std::string& src) {
  if (!e) return;
  if (e->type == Expr::kFilter && !find_filter(e->name))
    throw Error("jinja syntax error at " + line_col(src, e->pos) + ": no filter named '" + e->name + "'");
  if (e->type == Expr::kTest && !find_test(e->name))
    throw Error("jinja syntax error at " + line_col(src, e->pos) + ": no test named '" + e->name + "'");
  for (const ExprPtr& a : e->args) check_names(a.get(), src);
  for (const auto& kv : e->kwargs) check_names(kv.second.get(), src);
}

void check_names(const Body& body, const std::string& src) {
  for (const StmtPtr& s : body) {
    check_names(s->expr.get(), src);
    check_names(s->cond.get(), src);
    for (const ExprPtr& c : s->conds) check_names(c.get(), src);
    for (const Body& b : s->bodies) check_names(b, src);
    check_names(s->body, src);
    check_names(s->else_body, src);
    for (const MacroParam& p : s->params) check_names(p.default_value.get(), src);
    for (const ExprPtr& f : s->filters) check_names(f.get(), src);
    for (const auto& a : s->assigns) check_names(a.second.get(), src);
  }
}

}  // namespace

Template Template::parse(const std::string& source) {
  auto parsed = std::make_shared<ParsedTemplate>(parse_template(source));
  check_names(parsed->body, parsed->source);
  return Template(std::move(parsed));
}

const std::string& Template::source() const { return parsed_->source; }

std::string Template::render(const Variables& vars, const RenderLimits& limits) const {
  auto globals = std::make_shared<Scope>();
  globals->vars = vars;
  ScopePtr top = child(globals);
  std::string out;
  Renderer r(*parsed_, limits);
  r.run(top, out);
  return out;
}

}  // namespace agentr1::text::jinja
