// agentr1/text/jinja/jinja.h — a Jinja interpreter for HuggingFace chat templates: renders
// byte-identically to jinja2 3.1 in the environment HF transformers uses
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, tojson as
// json.dumps, raise_exception, strftime_now, the {% generation %} block).
//
//   auto t = jinja::Template::parse("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
//   std::string out = t.render({{"messages", jinja::Value::from_json(msgs)}});
//
// Parse once, render many times: a Template is immutable after parse and render is
// thread-safe. Syntax errors (at parse) name the line, column and construct; render
// errors are jinja::RenderError (raise_exception's message passes through verbatim).
// Supported: if/elif/else, for (else, `if` filter, loop.*, loop.cycle, break,
// continue, tuple unpacking), set (block set, tuples, namespace attributes), macro
// (defaults), filter blocks, with, raw, comments, whitespace control; the expression
// grammar of jinja2 with Python semantics; jinja2's builtin filters and tests that
// templates use (see jinja_builtins.cpp). Not supported (a syntax error says so):
// {% call %}, {% include %}/{% extends %}/{% import %}, recursive loops, *args.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agentr1/text/jinja/jinja_value.h"

namespace agentr1::text::jinja {

struct ParsedTemplate;

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;  // runaway output
  int max_call_depth = 100;             // macro recursion
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  // Throws agentr1::Error("jinja syntax error at line L, column C ...").
  static Template parse(const std::string& source);

  std::string render(const Variables& vars, const RenderLimits& limits = {}) const;

  // The template text as the lexer saw it (newlines normalised).
  const std::string& source() const;

 private:
  explicit Template(std::shared_ptr<const ParsedTemplate> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const ParsedTemplate> parsed_;
};

}  // namespace agentr1::text::jinja
