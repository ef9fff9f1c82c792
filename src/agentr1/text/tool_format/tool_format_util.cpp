#include "agentr1/text/tool_format/tool_format_util.h"

#include <algorithm>

namespace agentr1::text::detail {

size_t before_markers(const std::string& text, std::initializer_list<std::string_view> markers) {
  size_t best = text.size();
  for (std::string_view m : markers) {
    const size_t full = text.find(m);
    if (full != std::string::npos) best = std::min(best, full);
    // The earliest start whose rest of text is a proper prefix of m.
    const size_t from = text.size() >= m.size() ? text.size() - m.size() + 1 : 0;
    for (size_t p = from; p < std::min(best, text.size()); ++p)
      if (m.compare(0, text.size() - p, text, p, text.size() - p) == 0) {
        best = p;
        break;
      }
  }
  return best;
}

std::string quote(const std::string& s, size_t max_len) {
  std::string q = s.size() > max_len ? s.substr(0, max_len) + "..." : s;
  for (char& c : q)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return "'" + q + "'";
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && !(len == 2 && c < 0xC2) && !(c > 0xF4);
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);  // overlong, surrogate
    }
    if (ok && len == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string parse_error_detail(const std::string& what) {
  size_t p = what.find("column ");
  if (p != std::string::npos) p = what.find(": ", p);
  if (p != std::string::npos) return what.substr(p + 2);
  p = what.find("] ");
  return p == std::string::npos ? what : what.substr(p + 2);
}

size_t json_value_end(const std::string& s, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string::npos;
}

bool parse_json(const std::string& text, const std::string& head, json& out,
                std::string& message) {
  try {
    out = json::parse(text);
    return true;
  } catch (const json::parse_error& e) {
    message = head + "invalid JSON at byte " + std::to_string(e.byte) + ": " +
              parse_error_detail(e.what());
  } catch (const json::exception& e) {  // e.g. a number out of range
    message = head + "invalid JSON: " + parse_error_detail(e.what());
  }
  return false;
}

bool call_from_object(const json& j, const std::string& head, const std::string& expected,
                      bool accept_parameters, ToolCall& call, std::string& message) {
  const std::string tail = "; " + expected;
  if (!j.is_object()) {
    message = head + "expected a JSON object, got " + std::string(j.type_name()) + tail;
    return false;
  }
  auto name_it = j.find("name");
  if (name_it == j.end()) {
    message = head + "missing \"name\"" + tail;
    return false;
  }
  if (!name_it->is_string()) {
    message = head + "\"name\" must be a string, got " + std::string(name_it->type_name()) + tail;
    return false;
  }
  const std::string name = name_it->get<std::string>();
  if (name.empty()) {
    message = head + "\"name\" is empty" + tail;
    return false;
  }
  auto args_it = j.find("arguments");
  const auto params_it = j.find("parameters");
  if (accept_parameters && args_it != j.end() && params_it != j.end()) {
    message = head + "both \"arguments\" and \"parameters\" for '" + name + "'; write one" + tail;
    return false;
  }
  if (accept_parameters && args_it == j.end()) args_it = params_it;
  if (args_it == j.end()) {
    message = head + "missing \"" + std::string(accept_parameters ? "parameters" : "arguments") +
              "\" for '" + name + "'" +
              (params_it != j.end() ? " (found \"parameters\"; name it \"arguments\")" : "") + tail;
    return false;
  }
  const std::string key = args_it.key();
  json args = *args_it;
  if (args.is_string()) {
    const std::string s = args.get<std::string>();
    try {
      args = json::parse(s);
    } catch (const json::exception& e) {
      message = head + "\"" + key + "\" for '" + name + "' is a string that is not valid JSON (" +
                parse_error_detail(e.what()) + "): " + quote(s) + tail;
      return false;
    }
    if (!args.is_object()) {
      message = head + "\"" + key + "\" for '" + name + "' is a string holding " +
                std::string(args.type_name()) + ", not a JSON object" + tail;
      return false;
    }
  }
  if (!args.is_object()) {
    message = head + "\"" + key + "\" for '" + name + "' must be a JSON object, got " +
              std::string(args.type_name()) + tail;
    return false;
  }
  call.name = name;
  call.arguments = std::move(args);
  return true;
}

std::string json_string(const std::string& s) {
  return json(s).dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

}  // namespace agentr1::text::detail
