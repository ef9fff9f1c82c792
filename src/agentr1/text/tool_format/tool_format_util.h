// agentr1/text/tool_format/tool_format_util.h — helpers the tool-call formats share (internal to
// agentr1_text: tool_format*.cpp). Nothing here throws on model text.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "agentr1/core/json.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::text::detail {

inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The first position of `text` where one of `markers` occurs, or from which the rest of
// `text` is a proper prefix of a marker (it may still become one); text.size() if none.
// ToolFormat::stream_safe_prefix of formats whose markup starts with fixed tags.
size_t before_markers(const std::string& text, std::initializer_list<std::string_view> markers);

// A short, single-line quote of model text for error messages: 'abc...'.
std::string quote(const std::string& s, size_t max_len = 60);

// s with invalid UTF-8 replaced by U+FFFD (messages go into JSON and the tokenizer).
std::string valid_utf8(const std::string& s);

// nlohmann's parse_error text without its "[json.exception...] parse error at line 1,
// column 17: " prefix.
std::string parse_error_detail(const std::string& what);

// The index one past the JSON object or array that starts at s[begin] ('{' or '['),
// found by matching brackets outside strings; npos when it is not closed.
size_t json_value_end(const std::string& s, size_t begin);

// Parses `text` (already trimmed) as JSON. On failure fills `message` with
// head + "invalid JSON at byte N: <detail>" and returns false.
bool parse_json(const std::string& text, const std::string& head, json& out,
                std::string& message);

// Reads {"name": ..., "arguments": {...}} (also "parameters" when accept_parameters; an
// arguments string holding an object is decoded). Messages start with `head` ("tool call
// 2: ") and end with "; " + expected. Returns false with `message` set on any violation.
bool call_from_object(const json& j, const std::string& head, const std::string& expected,
                      bool accept_parameters, ToolCall& call, std::string& message);

// Python's json.dumps(s, ensure_ascii=False) for a string (what Jinja's tojson gives in
// HF templates); invalid UTF-8 becomes U+FFFD.
std::string json_string(const std::string& s);

}  // namespace agentr1::text::detail
