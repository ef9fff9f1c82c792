// agentr1/text/jinja/jinja_builtins.h — what jinja2 3.1's ImmutableSandboxedEnvironment gives
// a template besides syntax: operators with Python semantics, sandboxed attribute and
// item lookup (Python str/list/dict methods; mutating ones are refused), the builtin
// filters and tests, and the globals HF transformers adds (raise_exception,
// strftime_now) next to jinja's (range, dict, namespace).
#pragma once

#include <string>

#include "agentr1/text/jinja/jinja_value.h"

namespace agentr1::text::jinja {

// obj.name: Python attribute (methods of str, list, dict) first, then obj["name"].
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: item first, then attribute for string keys; Undefined when neither.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] (Undefined bounds are omitted ones).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// + - * / // % ** ~ with Python semantics.
Value binary_op(const std::string& op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);

using FilterFn = Value (*)(const Value& input, CallArgs& args);
using TestFn = bool (*)(const Value& value, CallArgs& args);
// nullptr when unknown.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
// Builtin global (range, dict, namespace, raise_exception, strftime_now); Undefined
// when unknown.
Value find_global(const std::string& name);

// jinja2's namespace object: the one value a template may assign attributes on.
class Namespace : public Object {
 public:
  Value attr(const std::string& name) const override;
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  void set(const std::string& name, Value v) { vars.set(Value(name), std::move(v)); }
  Dict vars;
};

}  // namespace agentr1::text::jinja
