// agentr1/text/jinja/jinja_value.h — the values a Jinja template computes with, with
// Python's semantics (what jinja2 does, since it runs on Python objects): truthiness,
// ==, <, str() and repr() printing ("[1, 'a']", "None", "True", floats as repr),
// and jinja2's default Undefined (prints "", iterates empty, is falsy; using it in
// arithmetic or taking its attributes raises).
//
//   Value v = Value::from_json(json::parse(R"({"a": [1, 2.0, null]})"));
//   v.str();  // "{'a': [1, 2.0, None]}"
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

namespace agentr1::text::jinja {

// An error raised while rendering (jinja2's TemplateError and the Python exceptions a
// template can trigger). raised_by_template is true for raise_exception(msg): what()
// is then exactly msg.
class RenderError : public Error {
 public:
  explicit RenderError(const std::string& what, bool raised_by_template = false)
      : Error(what), raised_by_template(raised_by_template) {}
  bool raised_by_template;
};

class Value;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<Value, Value>> items;  // insertion order, like Python's dict
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Objects with attributes (loop, namespace): attr() returns Undefined when absent.
class Object {
 public:
  virtual ~Object() = default;
  virtual Value attr(const std::string& name) const;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
};

using Function = std::function<Value(CallArgs&)>;

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction, kObject };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint = {}, bool unsafe = false);
  static Value none();
  Value(bool b) : kind_(Kind::kBool), i_(b) {}  // NOLINT
  Value(int i) : kind_(Kind::kInt), i_(i) {}  // NOLINT
  Value(std::int64_t i) : kind_(Kind::kInt), i_(i) {}  // NOLINT
  Value(double f) : kind_(Kind::kFloat), f_(f) {}  // NOLINT
  Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}  // NOLINT
  Value(const char* s) : kind_(Kind::kString), s_(s) {}  // NOLINT
  // tuple: prints "(a, b)" and is unequal to a list. lazy: a generator or iterator
  // (select, map, reverse...): always truthy, has no length, cannot be indexed.
  static Value list(List items, bool tuple = false, bool lazy = false);
  static Value dict(Dict d);
  static Value function(std::string name, Function fn);
  static Value object(std::shared_ptr<Object> obj);
  static Value from_json(const json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_int() const { return kind_ == Kind::kInt; }  // not bool
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_lazy() const { return kind_ == Kind::kList && lazy_; }

  bool as_bool() const { return i_ != 0; }
  std::int64_t as_int() const { return i_; }  // int or bool
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& as_string() const { return s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *fn_; }
  const std::string& function_name() const { return s_; }
  Object* as_object() const { return obj_.get(); }
  std::shared_ptr<Object> object_ptr() const { return obj_; }
  // Undefined: the name or "'dict object' has no attribute 'x'" for error messages.
  const std::string& undefined_hint() const { return s_; }
  bool unsafe() const { return kind_ == Kind::kUndefined && i_ != 0; }

  // Python's bool(x).
  bool truthy() const;
  // Python's str(x) and repr(x).
  std::string str() const;
  std::string repr() const;
  void str_into(std::string& out) const;
  // Python's type name ("str", "int", "dict", "list", "NoneType", ...).
  std::string type_name() const;
  // Raises jinja2's UndefinedError for an Undefined (used before any operation on it).
  [[noreturn]] void raise_undefined() const;

  // Elements for iteration: list items, dict keys, string characters; Undefined is
  // empty. Throws for others.
  List iterate() const;
  // len(x). Throws for types without a length.
  std::int64_t length() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool lazy_ = false;
  std::int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<const Function> fn_;
  std::shared_ptr<Object> obj_;
};

// Python ==.
bool equal(const Value& a, const Value& b);
// Python <; throws RenderError for unorderable types.
bool less(const Value& a, const Value& b);

// Python float repr: "1.0", "0.1", "1e-07", "1.5e+16", "inf", "nan".
std::string python_float_repr(double v);

// json.dumps(x, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) as
// HF transformers' tojson filter calls it. indent < 0 means None; indent_str is used
// when set (Python allows a string indent). Throws RenderError for values JSON cannot
// hold (Undefined, functions).
struct JsonDumpOptions {
  int indent = -1;
  std::string indent_str;
  bool has_indent_str = false;
  std::string item_sep;  // default: ", " without indent, "," with it
  std::string key_sep = ": ";
  bool has_item_sep = false;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& opts = {});

// UTF-8 helpers (Python strings index code points).
std::vector<char32_t> utf8_decode(const std::string& s);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(const std::vector<char32_t>& cps, size_t begin, size_t end);
bool is_ascii(const std::string& s);
bool py_isspace(char32_t c);

}  // namespace agentr1::text::jinja
