#include "agentr1/text/jinja/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace agentr1::text::jinja {

// ---------------------------------------------------------------------------
// UTF-8

std::vector<char32_t> utf8_decode(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += n;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string utf8_encode(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) utf8_append(out, cps[i]);
  return out;
}

bool is_ascii(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

bool py_isspace(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

// ---------------------------------------------------------------------------
// Dict

const Value* Dict::find(const Value& key) const {
  for (const auto& kv : items)
    if (equal(kv.first, key)) return &kv.second;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& kv : items)
    if (kv.first.is_string() && kv.first.as_string() == key) return &kv.second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& kv : items) {
    if (equal(kv.first, key)) {
      kv.second = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Object::attr(const std::string& name) const {
  return Value::undefined("'" + type_name() + " object' has no attribute '" + name + "'");
}

std::string Object::repr() const { return "<" + type_name() + " object>"; }

// ---------------------------------------------------------------------------
// Value construction

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.s_ = std::move(hint);
  v.i_ = unsafe ? 1 : 0;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::list(List items, bool tuple, bool lazy) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.lazy_ = lazy;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

Value Value::object(std::shared_ptr<Object> obj) {
  Value v;
  v.kind_ = Kind::kObject;
  v.obj_ = std::move(obj);
  return v;
}

Value Value::from_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return none();
    case json::value_t::boolean:
      return Value(j.get<bool>());
    case json::value_t::number_integer:
      return Value(j.get<std::int64_t>());
    case json::value_t::number_unsigned:
      return Value(static_cast<std::int64_t>(j.get<std::uint64_t>()));
    case json::value_t::number_float:
      return Value(j.get<double>());
    case json::value_t::string:
      return Value(j.get<std::string>());
    case json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(Value(it.key()), from_json(it.value()));
      return dict(std::move(d));
    }
    default:
      throw Error(std::string("jinja: cannot pass a JSON value of type ") + j.type_name() +
                  " to a template");
  }
}

// ---------------------------------------------------------------------------
// Python semantics

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
      return lazy_ || !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return lazy_ ? "generator" : tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kFunction:
      return "function";
    case Kind::kObject:
      return obj_->type_name();
  }
  return "?";
}

void Value::raise_undefined() const {
  if (unsafe()) throw RenderError("SecurityError: " + s_);
  throw RenderError("UndefinedError: " + (s_.empty() ? std::string("value is undefined")
                                                     : s_.find(' ') == std::string::npos
                                                           ? "'" + s_ + "' is undefined"
                                                           : s_));
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (!s.empty() && s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t epos = s.find('e');
  const std::string mantissa = s.substr(0, epos);
  const int exp = std::stoi(s.substr(epos + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      const size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out = digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int aexp = exp < 0 ? -exp : exp;
    out += exp < 0 ? "e-" : "e+";
    if (aexp < 10) out += "0";
    out += std::to_string(aexp);
  }
  return sign + out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad || c == 0x2028 || c == 0x2029 || c == 0xfeff) return false;
  if ((c >= 0x200b && c <= 0x200f) || (c >= 0x2060 && c <= 0x2064)) return false;
  if ((c >= 0x2000 && c <= 0x200a) || c == 0x1680 || c == 0x202f || c == 0x205f || c == 0x3000)
    return false;
  if (c >= 0xd800 && c <= 0xdfff) return false;
  return true;
}

void string_repr_into(const std::string& s, std::string& out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out += q;
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8_append(out, c);
    }
  }
  out += q;
}

void repr_into(const Value& v, std::string& out) {
  if (v.is_string()) {
    string_repr_into(v.as_string(), out);
  } else {
    v.str_into(out);
  }
}

}  // namespace

void Value::str_into(std::string& out) const {
  switch (kind_) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += i_ ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(i_);
      return;
    case Kind::kFloat:
      out += python_float_repr(f_);
      return;
    case Kind::kString:
      out += s_;
      return;
    case Kind::kList: {
      if (lazy_) {
        out += "<generator object>";
        return;
      }
      out += tuple_ ? '(' : '[';
      bool first = true;
      for (const auto& e : *list_) {
        if (!first) out += ", ";
        first = false;
        repr_into(e, out);
      }
      if (tuple_ && list_->size() == 1) out += ',';
      out += tuple_ ? ')' : ']';
      return;
    }
    case Kind::kDict: {
      out += '{';
      bool first = true;
      for (const auto& kv : dict_->items) {
        if (!first) out += ", ";
        first = false;
        repr_into(kv.first, out);
        out += ": ";
        repr_into(kv.second, out);
      }
      out += '}';
      return;
    }
    case Kind::kFunction:
      out += "<function " + s_ + ">";
      return;
    case Kind::kObject:
      out += obj_->repr();
      return;
  }
}

std::string Value::str() const {
  if (kind_ == Kind::kString) return s_;
  std::string out;
  str_into(out);
  return out;
}

std::string Value::repr() const {
  std::string out;
  if (kind_ == Kind::kUndefined) return "Undefined";
  repr_into(*this, out);
  return out;
}

List Value::iterate() const {
  switch (kind_) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return *list_;
    case Kind::kDict: {
      List keys;
      keys.reserve(dict_->items.size());
      for (const auto& kv : dict_->items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      List chars;
      if (is_ascii(s_)) {
        for (char c : s_) chars.emplace_back(std::string(1, c));
      } else {
        for (char32_t c : utf8_decode(s_)) {
          std::string one;
          utf8_append(one, c);
          chars.emplace_back(std::move(one));
        }
      }
      return chars;
    }
    default:
      throw RenderError("TypeError: '" + type_name() + "' object is not iterable");
  }
}

std::int64_t Value::length() const {
  switch (kind_) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return is_ascii(s_) ? static_cast<std::int64_t>(s_.size())
                          : static_cast<std::int64_t>(utf8_decode(s_).size());
    case Kind::kList:
      if (!lazy_) return static_cast<std::int64_t>(list_->size());
      break;
    case Kind::kDict:
      return static_cast<std::int64_t>(dict_->items.size());
    default:
      break;
  }
  throw RenderError("TypeError: object of type '" + type_name() + "' has no len()");
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.as_string() == b.as_string();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.is_lazy() || b.is_lazy())
        return a.is_lazy() && b.is_lazy() && &a.as_list() == &b.as_list();
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& kv : x.items) {
        const Value* o = y.find(kv.first);
        if (!o || !equal(kv.second, *o)) return false;
      }
      return true;
    }
    case Kind::kFunction:
      return &a.as_function() == &b.as_function();
    case Kind::kObject:
      return a.as_object() == b.as_object();
    default:
      return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_lazy() &&
      !b.is_lazy()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError("TypeError: '<' not supported between instances of '" + a.type_name() +
                    "' and '" + b.type_name() + "'");
}

// ---------------------------------------------------------------------------
// json.dumps

namespace {

void json_string_into(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
          char buf[16];
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xd800 + (v >> 10)),
                          static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Kind::kString:
      return k.as_string();
    case Kind::kBool:
      return k.as_bool() ? "true" : "false";
    case Kind::kNone:
      return "null";
    case Kind::kInt:
      return std::to_string(k.as_int());
    case Kind::kFloat:
      return python_float_repr(k.as_double());
    default:
      throw RenderError("TypeError: keys must be str, int, float, bool or None, not " +
                        k.type_name());
  }
}

void dumps_into(const Value& v, const JsonDumpOptions& o, int level, std::string& out) {
  const bool indented = o.indent >= 0 || o.has_indent_str;
  const std::string item_sep = o.has_item_sep ? o.item_sep : indented ? "," : ", ";
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += o.has_indent_str ? o.indent_str : std::string(o.indent, ' ');
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d > 0 ? "Infinity" : "-Infinity";
      else
        out += python_float_repr(d);
      return;
    }
    case Kind::kString:
      json_string_into(v.as_string(), o.ensure_ascii, out);
      return;
    case Kind::kList: {
      if (v.is_lazy())
        throw RenderError("TypeError: Object of type generator is not JSON serializable");
      const List& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indented) newline(level + 1);
        dumps_into(items[i], o, level + 1, out);
      }
      if (indented) newline(level);
      out += ']';
      return;
    }
    case Kind::kDict: {
      const Dict& d = v.as_dict();
      if (d.items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : d.items) items.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return less(a->first, b->first); });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indented) newline(level + 1);
        json_string_into(json_key(items[i]->first), o.ensure_ascii, out);
        out += o.key_sep;
        dumps_into(items[i]->second, o, level + 1, out);
      }
      if (indented) newline(level);
      out += '}';
      return;
    }
    case Kind::kUndefined:
      if (v.unsafe()) v.raise_undefined();
      throw RenderError("TypeError: Object of type Undefined is not JSON serializable");
    default:
      throw RenderError("TypeError: Object of type " + v.type_name() +
                        " is not JSON serializable");
  }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  dumps_into(v, opts, 0, out);
  return out;
}

}  // namespace agentr1::text::jinja
