#include "agentr1/text/jinja/jinja_builtins.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <unordered_map>

namespace agentr1::text::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw RenderError("TypeError: " + what); }

// ---------------------------------------------------------------------------
// Argument binding: positional or keyword, Python style.

class Args {
 public:
  Args(const char* fn, CallArgs& a, std::vector<const char*> names)
      : fn_(fn), a_(a), names_(std::move(names)) {
    if (a_.pos.size() > names_.size())
      type_error(std::string(fn_) + "() takes at most " + std::to_string(names_.size()) +
                 " argument(s) (" + std::to_string(a_.pos.size()) + " given)");
    for (const auto& kv : a_.kw) {
      bool known = false;
      for (size_t i = 0; i < names_.size(); ++i) {
        if (kv.first == names_[i]) {
          known = true;
          if (i < a_.pos.size())
            type_error(std::string(fn_) + "() got multiple values for argument '" + kv.first + "'");
        }
      }
      if (!known) type_error(std::string(fn_) + "() got an unexpected keyword argument '" + kv.first + "'");
    }
  }
  bool has(size_t i) const {
    if (i < a_.pos.size()) return true;
    for (const auto& kv : a_.kw)
      if (kv.first == names_[i]) return true;
    return false;
  }
  Value get(size_t i, Value def = Value()) const {
    if (i < a_.pos.size()) return a_.pos[i];
    for (const auto& kv : a_.kw)
      if (kv.first == names_[i]) return kv.second;
    return def;
  }

 private:
  const char* fn_;
  CallArgs& a_;
  std::vector<const char*> names_;
};

void no_args(const char* fn, CallArgs& a) { Args(fn, a, {}); }

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) type_error(std::string(what) + " must be str, not " + v.type_name());
  return v.as_string();
}
std::int64_t need_int(const Value& v, const char* what) {
  if (v.kind() != Kind::kInt && v.kind() != Kind::kBool)
    type_error(std::string(what) + ": '" + v.type_name() + "' object cannot be interpreted as an integer");
  return v.as_int();
}

// ---------------------------------------------------------------------------
// Strings (Python indexes code points).

bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
char32_t to_upper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_lower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out += static_cast<char>(f(static_cast<char32_t>(c)));
    return out;
  }
  for (char32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}
std::string str_upper(const std::string& s) { return map_chars(s, to_upper); }
std::string str_lower(const std::string& s) { return map_chars(s, to_lower); }

std::string str_capitalize(const std::string& s) {
  std::vector<char32_t> cps = utf8_decode(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) utf8_append(out, i == 0 ? to_upper(cps[i]) : to_lower(cps[i]));
  return out;
}

// Python's str.title(): upper after an uncased character, lower after a cased one.
std::string str_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = is_cased(c);
  }
  return out;
}

bool str_is_case(const std::string& s, bool upper) {
  bool any = false;
  for (char32_t c : utf8_decode(s)) {
    if (!is_cased(c)) continue;
    any = true;
    if (upper ? to_upper(c) != c || to_lower(c) == c : to_lower(c) != c || to_upper(c) == c)
      return false;
  }
  return any;
}

// strip/lstrip/rstrip with Python's chars argument (None: whitespace).
std::string str_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<char32_t> set;
  const bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) set = utf8_decode(need_str(chars, "strip arg"));
  auto strip_it = [&](char32_t c) {
    return ws ? py_isspace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  const std::vector<char32_t> cps = utf8_decode(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  if (b == 0 && e == cps.size()) return s;
  return utf8_encode(cps, b, e);
}

std::string str_replace(const std::string& s, const std::string& old, const std::string& rep,
                        std::int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts rep between characters and at both ends.
    const std::vector<char32_t> cps = utf8_decode(s);
    std::int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < cps.size()) utf8_append(out, cps[i]);
    }
    return out;
  }
  size_t pos = 0;
  std::int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += rep;
    pos = f + old.size();
    ++n;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

List str_split(const std::string& s, const Value& sep_v, std::int64_t maxsplit, bool from_right) {
  List out;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    // Runs of whitespace; leading/trailing whitespace ignored.
    const std::vector<char32_t> cps = utf8_decode(s);
    std::vector<std::pair<size_t, size_t>> words;
    if (!from_right) {
      size_t i = 0;
      std::int64_t n = 0;
      while (i < cps.size()) {
        while (i < cps.size() && py_isspace(cps[i])) ++i;
        if (i >= cps.size()) break;
        if (maxsplit >= 0 && n >= maxsplit) {
          words.emplace_back(i, cps.size());  // the rest keeps its trailing whitespace
          break;
        }
        size_t j = i;
        while (j < cps.size() && !py_isspace(cps[j])) ++j;
        words.emplace_back(i, j);
        ++n;
        i = j;
      }
    } else {
      size_t i = cps.size();
      std::int64_t n = 0;
      while (i > 0) {
        while (i > 0 && py_isspace(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && n >= maxsplit) {
          words.emplace_back(0, i);  // the rest keeps its leading whitespace
          break;
        }
        size_t j = i;
        while (j > 0 && !py_isspace(cps[j - 1])) --j;
        words.emplace_back(j, i);
        ++n;
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (const auto& w : words) out.emplace_back(utf8_encode(cps, w.first, w.second));
    return out;
  }
  const std::string& sep = need_str(sep_v, "split separator");
  if (sep.empty()) throw RenderError("ValueError: empty separator");
  if (!from_right) {
    size_t pos = 0;
    std::int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      const size_t f = s.find(sep, pos);
      if (f == std::string::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep.size();
      ++n;
    }
    out.emplace_back(s.substr(pos));
  } else {
    size_t end = s.size();
    std::int64_t n = 0;
    List rev;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < sep.size()) break;
      const size_t f = s.rfind(sep, end - sep.size());
      if (f == std::string::npos) break;
      rev.emplace_back(s.substr(f + sep.size(), end - f - sep.size()));
      end = f;
      ++n;
    }
    rev.emplace_back(s.substr(0, end));
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

List str_splitlines(const std::string& s, bool keepends) {
  List out;
  const std::vector<char32_t> cps = utf8_decode(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool br = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
                    c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!br) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') end = i + 2;
    out.emplace_back(utf8_encode(cps, start, keepends ? end : i));
    start = end;
    i = end - 1;
  }
  if (start < cps.size()) out.emplace_back(utf8_encode(cps, start, cps.size()));
  return out;
}

// Python's str.find over code points.
std::int64_t str_find(const std::string& s, const std::string& sub, bool from_right) {
  const size_t f = from_right ? s.rfind(sub) : s.find(sub);
  if (f == std::string::npos) return -1;
  if (is_ascii(s)) return static_cast<std::int64_t>(f);
  return static_cast<std::int64_t>(utf8_decode(s.substr(0, f)).size());
}

std::int64_t str_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<std::int64_t>(utf8_decode(s).size()) + 1;
  std::int64_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

bool str_affix(const std::string& s, const Value& arg, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (arg.is_tuple()) {
    for (const Value& v : arg.as_list())
      if (one(need_str(v, prefix ? "startswith arg" : "endswith arg"))) return true;
    return false;
  }
  if (!arg.is_string())
    type_error(std::string(prefix ? "startswith" : "endswith") +
               " first arg must be str or a tuple of str, not " + arg.type_name());
  return one(arg.as_string());
}

// Python's str.format with {} / {0} / {name} fields (no format specs).
std::string str_format(const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t e = fmt.find('}', i);
      if (e == std::string::npos) throw RenderError("ValueError: Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos)
        throw RenderError("str.format: format specs and conversions are not supported ('" + field + "')");
      const Value* v = nullptr;
      if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
        const size_t idx = field.empty() ? auto_idx++ : std::stoul(field);
        if (idx >= a.pos.size()) throw RenderError("IndexError: Replacement index " + std::to_string(idx) + " out of range");
        v = &a.pos[idx];
      } else {
        for (const auto& kv : a.kw)
          if (kv.first == field) v = &kv.second;
        if (!v) throw RenderError("KeyError: '" + field + "'");
      }
      v->str_into(out);
      i = e;
    } else if (c == '}') {
      throw RenderError("ValueError: Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

// Python's printf-style "%s %d %r %f %%" (the format filter and the % operator).
std::string percent_format(const std::string& fmt, const Value& args) {
  List vals;
  const Value* mapping = nullptr;
  if (args.is_tuple()) vals = args.as_list();
  else if (args.is_dict()) mapping = &args;
  else vals.push_back(args);
  std::string out;
  size_t k = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw RenderError("ValueError: incomplete format");
    const Value* v = nullptr;
    Value keyed;
    if (fmt[i] == '(' && mapping) {
      const size_t e = fmt.find(')', i);
      if (e == std::string::npos) throw RenderError("ValueError: incomplete format key");
      const Value* f = mapping->as_dict().find(fmt.substr(i + 1, e - i - 1));
      if (!f) throw RenderError("KeyError: '" + fmt.substr(i + 1, e - i - 1) + "'");
      keyed = *f;
      v = &keyed;
      i = e + 1;
    }
    std::string spec;
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.' ||
                              fmt[i] == '-' || fmt[i] == '+' || fmt[i] == ' ' || fmt[i] == '0'))
      spec += fmt[i++];
    if (i >= fmt.size()) throw RenderError("ValueError: incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!v) {
      if (mapping) {
        v = mapping;
      } else {
        if (k >= vals.size()) type_error("not enough arguments for format string");
        v = &vals[k++];
      }
    }
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        std::string s = conv == 's' ? v->str() : v->repr();
        if (!spec.empty()) {
          std::snprintf(buf, sizeof(buf), ("%" + spec + "s").c_str(), s.c_str());
          s = buf;
        }
        out += s;
        break;
      }
      case 'd':
      case 'i':
        if (!v->is_number()) type_error("%d format: a real number is required, not " + v->type_name());
        std::snprintf(buf, sizeof(buf), ("%" + spec + "lld").c_str(),
                      static_cast<long long>(v->kind() == Kind::kFloat ? std::trunc(v->as_double()) : v->as_int()));
        out += buf;
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!v->is_number()) type_error("must be real number, not " + v->type_name());
        std::snprintf(buf, sizeof(buf), ("%" + spec + conv).c_str(), v->as_double());
        out += buf;
        break;
      default:
        throw RenderError(std::string("ValueError: unsupported format character '") + conv + "'");
    }
  }
  if (!mapping && k < vals.size()) type_error("not all arguments converted during string formatting");
  return out;
}

// ---------------------------------------------------------------------------
// Methods

const std::set<std::string> kMutating = {"append", "extend", "insert", "pop", "remove", "reverse",
                                         "sort", "clear", "update", "setdefault", "popitem",
                                         "add", "discard"};

Value call_str_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "startswith" || name == "endswith") {
    Args p(name.c_str(), a, {"prefix", "start", "end"});
    return Value(str_affix(s, p.get(0), name == "startswith"));
  }
  if (name == "split" || name == "rsplit") {
    Args p(name.c_str(), a, {"sep", "maxsplit"});
    return Value::list(str_split(s, p.get(0, Value::none()), need_int(p.get(1, Value(-1)), "maxsplit"),
                                 name == "rsplit"));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args p(name.c_str(), a, {"chars"});
    return Value(str_strip(s, p.get(0, Value::none()), name != "rstrip", name != "lstrip"));
  }
  if (name == "replace") {
    Args p("replace", a, {"old", "new", "count"});
    return Value(str_replace(s, need_str(p.get(0), "replace arg 1"), need_str(p.get(1), "replace arg 2"),
                             need_int(p.get(2, Value(-1)), "count")));
  }
  if (name == "upper") return no_args("upper", a), Value(str_upper(s));
  if (name == "lower" || name == "casefold") return no_args("lower", a), Value(str_lower(s));
  if (name == "title") return no_args("title", a), Value(str_title(s));
  if (name == "capitalize") return no_args("capitalize", a), Value(str_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    Args p(name.c_str(), a, {"sub"});
    const std::int64_t r = str_find(s, need_str(p.get(0), "find arg"), name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) throw RenderError("ValueError: substring not found");
    return Value(r);
  }
  if (name == "count") {
    Args p("count", a, {"sub"});
    return Value(str_count(s, need_str(p.get(0), "count arg")));
  }
  if (name == "join") {
    Args p("join", a, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : p.get(0).iterate()) {
      if (!first) out += s;
      first = false;
      out += need_str(v, "sequence item");
    }
    return Value(out);
  }
  if (name == "splitlines") {
    Args p("splitlines", a, {"keepends"});
    return Value::list(str_splitlines(s, p.get(0, Value(false)).truthy()));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
      name == "isalnum" || name == "isspace") {
    no_args(name.c_str(), a);
    const std::vector<char32_t> cps = utf8_decode(s);
    if (cps.empty()) return Value(false);
    for (char32_t c : cps) {
      const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      const bool digit = cat == UTF8PROC_CATEGORY_ND;
      const bool alpha = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
                         cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
                         cat == UTF8PROC_CATEGORY_LO;
      bool ok = name == "isspace" ? py_isspace(c) : name == "isalpha" ? alpha : name == "isalnum" ? alpha || digit : digit;
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  if (name == "isupper" || name == "islower") return no_args(name.c_str(), a), Value(str_is_case(s, name == "isupper"));
  if (name == "removeprefix" || name == "removesuffix") {
    Args p(name.c_str(), a, {"affix"});
    const std::string& x = need_str(p.get(0), name.c_str());
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    return Value(s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0
                     ? s.substr(0, s.size() - x.size())
                     : s);
  }
  if (name == "format") return Value(str_format(s, a));
  if (name == "zfill") {
    Args p("zfill", a, {"width"});
    const std::int64_t w = need_int(p.get(0), "width");
    const std::int64_t len = Value(s).length();
    if (len >= w) return Value(s);
    size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return Value(s.substr(0, sign) + std::string(static_cast<size_t>(w - len), '0') + s.substr(sign));
  }
  throw RenderError("AttributeError: 'str' object has no attribute '" + name + "'");
}

const std::set<std::string> kStrMethods = {
    "startswith", "endswith", "split",   "rsplit",  "strip",      "lstrip",       "rstrip",
    "replace",    "upper",    "lower",   "casefold", "title",     "capitalize",   "find",
    "rfind",      "index",    "rindex",  "count",   "join",       "splitlines",   "isdigit",
    "isnumeric",  "isdecimal", "isalpha", "isalnum", "isspace",   "isupper",      "islower",
    "removeprefix", "removesuffix", "format", "zfill"};

Value bind(const Value& self, const std::string& name,
           Value (*fn)(const Value&, const std::string&, CallArgs&)) {
  return Value::function(name, [self, name, fn](CallArgs& a) { return fn(self, name, a); });
}

Value str_method(const Value& self, const std::string& name, CallArgs& a) {
  return call_str_method(self.as_string(), name, a);
}

Value dict_method(const Value& self, const std::string& name, CallArgs& a) {
  const Dict& d = self.as_dict();
  if (name == "get") {
    Args p("get", a, {"key", "default"});
    const Value* v = d.find(p.get(0));
    return v ? *v : p.get(1, Value::none());
  }
  no_args(name.c_str(), a);
  List out;
  for (const auto& kv : d.items) {
    if (name == "items") out.push_back(Value::list({kv.first, kv.second}, /*tuple=*/true));
    else if (name == "keys") out.push_back(kv.first);
    else out.push_back(kv.second);
  }
  if (name == "copy") return self;
  return Value::list(std::move(out));
}

Value list_method(const Value& self, const std::string& name, CallArgs& a) {
  const List& l = self.as_list();
  Args p(name.c_str(), a, {"value"});
  const Value x = p.get(0);
  if (name == "count") {
    std::int64_t n = 0;
    for (const Value& v : l) n += equal(v, x);
    return Value(n);
  }
  for (size_t i = 0; i < l.size(); ++i)
    if (equal(l[i], x)) return Value(static_cast<std::int64_t>(i));
  throw RenderError("ValueError: " + x.repr() + " is not in list");
}

Value unsafe_attr(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() +
                              "' object is unsafe.",
                          /*unsafe=*/true);
}

// Python attribute lookup (methods) for a value; Undefined-with-flag when unknown.
bool python_attr(const Value& obj, const std::string& name, Value* out) {
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') {
    *out = unsafe_attr(obj, name);
    return true;
  }
  switch (obj.kind()) {
    case Kind::kString:
      if (kStrMethods.count(name)) {
        *out = bind(obj, name, str_method);
        return true;
      }
      return false;
    case Kind::kDict:
      if (name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy") {
        *out = bind(obj, name, dict_method);
        return true;
      }
      if (kMutating.count(name) || name == "fromkeys") {
        *out = unsafe_attr(obj, name);
        return true;
      }
      return false;
    case Kind::kList:
      if (obj.is_lazy()) return false;
      if (name == "count" || name == "index") {
        *out = bind(obj, name, list_method);
        return true;
      }
      if (!obj.is_tuple() && kMutating.count(name)) {
        *out = unsafe_attr(obj, name);
        return true;
      }
      return false;
    case Kind::kObject: {
      Value v = obj.as_object()->attr(name);
      if (v.is_undefined()) return false;
      *out = std::move(v);
      return true;
    }
    default:
      return false;
  }
}

std::string type_object(const Value& obj) { return "'" + obj.type_name() + " object'"; }

// ---------------------------------------------------------------------------
// Indexing

// Python index normalisation; returns false when out of range.
bool norm_index(std::int64_t i, std::int64_t n, std::int64_t* out) {
  if (i < 0) i += n;
  if (i < 0 || i >= n) return false;
  *out = i;
  return true;
}

bool item_lookup(const Value& obj, const Value& key, Value* out) {
  switch (obj.kind()) {
    case Kind::kDict: {
      const Value* v = obj.as_dict().find(key);
      if (!v) return false;
      *out = *v;
      return true;
    }
    case Kind::kList: {
      if (obj.is_lazy()) type_error("'generator' object is not subscriptable");
      if (key.kind() != Kind::kInt && key.kind() != Kind::kBool) return false;
      const List& l = obj.as_list();
      std::int64_t i;
      if (!norm_index(key.as_int(), static_cast<std::int64_t>(l.size()), &i)) return false;
      *out = l[static_cast<size_t>(i)];
      return true;
    }
    case Kind::kString: {
      if (key.kind() != Kind::kInt && key.kind() != Kind::kBool) return false;
      const std::string& s = obj.as_string();
      if (is_ascii(s)) {
        std::int64_t i;
        if (!norm_index(key.as_int(), static_cast<std::int64_t>(s.size()), &i)) return false;
        *out = Value(std::string(1, s[static_cast<size_t>(i)]));
        return true;
      }
      const std::vector<char32_t> cps = utf8_decode(s);
      std::int64_t i;
      if (!norm_index(key.as_int(), static_cast<std::int64_t>(cps.size()), &i)) return false;
      *out = Value(utf8_encode(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
      return true;
    }
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------
// Helpers for filters

Value attr_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value cur = item;
  const std::string& path = attribute.as_string();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty();
    for (char c : part) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (cur.is_undefined()) cur.raise_undefined();
    cur = digits ? get_item(cur, Value(static_cast<std::int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

// ignore_case: lower-cases strings for comparisons (min, max, sort, unique, dictsort).
Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(str_lower(v.as_string()));
  return v;
}

Value as_iterable_list(const Value& v) { return Value::list(v.iterate()); }

CallArgs rest_args(CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

bool run_test(const std::string& name, const Value& v, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) throw RenderError("TemplateRuntimeError: No test named '" + name + "'.");
  return t(v, args);
}

Value select_impl(const Value& input, CallArgs& a, bool attr, bool select) {
  const char* fn = attr ? (select ? "selectattr" : "rejectattr") : (select ? "select" : "reject");
  size_t off = 0;
  Value attribute;
  if (attr) {
    if (a.pos.empty()) type_error(std::string(fn) + "() missing the attribute argument");
    attribute = a.pos[0];
    off = 1;
  }
  std::string test;
  CallArgs targs;
  const bool has_test = a.pos.size() > off;
  if (has_test) {
    test = need_str(a.pos[off], "test name");
    targs = rest_args(a, off + 1);
  } else if (!a.kw.empty()) {
    type_error(std::string(fn) + "() got unexpected keyword arguments");
  }
  List out;
  for (const Value& item : input.iterate()) {
    const Value v = attr ? attr_path(item, attribute) : item;
    bool ok;
    if (has_test) {
      CallArgs copy = targs;
      ok = run_test(test, v, copy);
    } else {
      ok = v.truthy();
    }
    if (ok == select) out.push_back(item);
  }
  return Value::list(std::move(out), false, /*lazy=*/true);
}

// ---------------------------------------------------------------------------
// Filters

Value f_abs(const Value& v, CallArgs& a) {
  no_args("abs", a);
  if (v.kind() == Kind::kFloat) return Value(std::fabs(v.as_double()));
  if (v.is_number()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  if (v.is_undefined()) v.raise_undefined();
  type_error("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_attr(const Value& v, CallArgs& a) {
  Args p("attr", a, {"name"});
  // getattr only: no fallback to items.
  const std::string name = need_str(p.get(0), "attribute name");
  Value out;
  if (!v.is_undefined() && python_attr(v, name, &out)) return out;
  return Value::undefined(type_object(v) + " has no attribute '" + name + "'");
}

Value f_batch(const Value& v, CallArgs& a) {
  Args p("batch", a, {"linecount", "fill_with"});
  const std::int64_t n = need_int(p.get(0), "linecount");
  if (n <= 0) throw RenderError("ValueError: batch size must be positive");
  const bool fill = p.has(1) && !p.get(1).is_none();
  List out, cur;
  for (const Value& x : v.iterate()) {
    cur.push_back(x);
    if (static_cast<std::int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill)
      while (static_cast<std::int64_t>(cur.size()) < n) cur.push_back(p.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out), false, true);
}

Value f_capitalize(const Value& v, CallArgs& a) {
  no_args("capitalize", a);
  return Value(str_capitalize(v.str()));
}

Value f_count(const Value& v, CallArgs& a) {
  no_args("length", a);
  if (v.kind() == Kind::kObject && v.as_object()->type_name() == "Namespace") type_error("object of type 'Namespace' has no len()");
  return Value(v.length());
}

Value f_default(const Value& v, CallArgs& a) {
  Args p("default", a, {"default_value", "boolean"});
  const bool boolean = p.get(1, Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return p.get(0, Value(""));
  return v;
}

Value f_dictsort(const Value& v, CallArgs& a) {
  Args p("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) type_error("You can only sort by either \"key\" or \"value\"");
  const bool cs = p.get(0, Value(false)).truthy();
  const std::string by = p.get(1, Value("key")).str();
  const bool rev = p.get(2, Value(false)).truthy();
  if (by != "key" && by != "value") throw RenderError("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  List items;
  for (const auto& kv : v.as_dict().items) items.push_back(Value::list({kv.first, kv.second}, true));
  const size_t idx = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = fold(x.as_list()[idx], cs), ky = fold(y.as_list()[idx], cs);
    return rev ? less(ky, kx) : less(kx, ky);
  });
  return Value::list(std::move(items));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value f_escape(const Value& v, CallArgs& a) {
  no_args("escape", a);
  if (v.is_undefined()) return Value("");
  return Value(html_escape(v.str()));
}

Value f_first(const Value& v, CallArgs& a) {
  no_args("first", a);
  const List items = v.iterate();
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(const Value& v, CallArgs& a) {
  no_args("last", a);
  if (v.is_lazy()) type_error("'generator' object is not reversible");
  const List items = v.iterate();
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

bool parse_py_float(const std::string& s, double* out) {
  const std::string t = str_strip(s, Value::none(), true, true);
  if (t.empty()) return false;
  std::string lower = str_lower(t);
  size_t b = lower[0] == '+' || lower[0] == '-' ? 1 : 0;
  const std::string body = lower.substr(b);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? std::nan("") : INFINITY;
    *out = lower[0] == '-' ? -x : x;
    return true;
  }
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(t[i + 1])))
      continue;
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
    clean += c;
  }
  try {
    size_t used = 0;
    *out = std::stod(clean, &used);
    return used == clean.size();
  } catch (const std::exception&) {
    return false;
  }
}

Value f_float(const Value& v, CallArgs& a) {
  Args p("float", a, {"default"});
  if (v.is_undefined()) v.raise_undefined();
  if (v.is_number()) return Value(v.as_double());
  double d;
  if (v.is_string() && parse_py_float(v.as_string(), &d)) return Value(d);
  return p.get(0, Value(0.0));
}

Value f_int(const Value& v, CallArgs& a) {
  Args p("int", a, {"default", "base"});
  const Value def = p.get(0, Value(0));
  const std::int64_t base = need_int(p.get(1, Value(10)), "base");
  if (v.is_undefined()) v.raise_undefined();
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value(v.as_int());
  if (v.kind() == Kind::kFloat) {
    if (std::isnan(v.as_double()) || std::isinf(v.as_double())) return def;
    return Value(static_cast<std::int64_t>(std::trunc(v.as_double())));
  }
  if (v.is_string()) {
    std::string t = str_strip(v.as_string(), Value::none(), true, true);
    std::string clean;
    for (char c : t)
      if (c != '_') clean += c;
    if (!clean.empty()) {
      try {
        size_t used = 0;
        const long long x = std::stoll(clean, &used, static_cast<int>(base));
        if (used == clean.size()) return Value(static_cast<std::int64_t>(x));
      } catch (const std::exception&) {
      }
    }
    double d;
    if (parse_py_float(v.as_string(), &d) && !std::isnan(d) && !std::isinf(d))
      return Value(static_cast<std::int64_t>(std::trunc(d)));
  }
  return def;
}

Value f_indent(const Value& v, CallArgs& a) {
  Args p("indent", a, {"width", "first", "blank"});
  const Value w = p.get(0, Value(4));
  const std::string ind = w.is_string() ? w.as_string() : std::string(static_cast<size_t>(std::max<std::int64_t>(0, need_int(w, "width"))), ' ');
  const bool first = p.get(1, Value(false)).truthy();
  const bool blank = p.get(2, Value(false)).truthy();
  const List lines = str_splitlines(v.str() + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i].as_string();
    }
  } else {
    rv = lines.empty() ? "" : lines[0].as_string();
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].as_string().empty()) rv += ind;
      rv += lines[i].as_string();
    }
  }
  if (first) rv = ind + rv;
  return Value(rv);
}

Value f_items(const Value& v, CallArgs& a) {
  no_args("items", a);
  if (v.is_undefined()) return Value::list({}, false, true);
  if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
  List out;
  for (const auto& kv : v.as_dict().items) out.push_back(Value::list({kv.first, kv.second}, true));
  return Value::list(std::move(out), false, true);
}

Value f_join(const Value& v, CallArgs& a) {
  Args p("join", a, {"d", "attribute"});
  const std::string d = p.get(0, Value("")).str();
  const Value attribute = p.get(1, Value::none());
  std::string out;
  bool first = true;
  for (const Value& x : v.iterate()) {
    if (!first) out += d;
    first = false;
    if (attribute.is_none()) x.str_into(out);
    else attr_path(x, attribute).str_into(out);
  }
  return Value(out);
}

Value f_list(const Value& v, CallArgs& a) {
  no_args("list", a);
  return as_iterable_list(v);
}

Value f_lower(const Value& v, CallArgs& a) {
  no_args("lower", a);
  return Value(str_lower(v.str()));
}

Value f_upper(const Value& v, CallArgs& a) {
  no_args("upper", a);
  return Value(str_upper(v.str()));
}

Value f_map(const Value& v, CallArgs& a) {
  List out;
  const List items = v.iterate();
  const Value* attribute = nullptr;
  const Value* def = nullptr;
  for (const auto& kv : a.kw) {
    if (kv.first == "attribute") attribute = &kv.second;
    else if (kv.first == "default") def = &kv.second;
  }
  if (a.pos.empty() && attribute) {
    for (const Value& x : items) {
      Value r = attr_path(x, *attribute);
      if (r.is_undefined() && def) r = *def;
      out.push_back(r);
    }
    return Value::list(std::move(out), false, true);
  }
  if (a.pos.empty()) throw RenderError("FilterArgumentError: map requires a filter argument");
  const std::string name = need_str(a.pos[0], "filter name");
  FilterFn f = find_filter(name);
  if (!f) throw RenderError("TemplateRuntimeError: No filter named '" + name + "'.");
  for (const Value& x : items) {
    CallArgs r = rest_args(a, 1);
    out.push_back(f(x, r));
  }
  return Value::list(std::move(out), false, true);
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  Args p(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const bool cs = p.get(0, Value(false)).truthy();
  const Value attribute = p.get(1, Value::none());
  const List items = v.iterate();
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) { return fold(attribute.is_none() ? x : attr_path(x, attribute), cs); };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const bool better = want_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return items[best];
}
Value f_max(const Value& v, CallArgs& a) { return min_max(v, a, true); }
Value f_min(const Value& v, CallArgs& a) { return min_max(v, a, false); }

Value f_replace(const Value& v, CallArgs& a) {
  Args p("replace", a, {"old", "new", "count"});
  const Value c = p.get(2, Value::none());
  return Value(str_replace(v.str(), p.get(0).str(), p.get(1).str(), c.is_none() ? -1 : need_int(c, "count")));
}

Value f_reverse(const Value& v, CallArgs& a) {
  no_args("reverse", a);
  if (v.is_string()) {
    std::vector<char32_t> cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(utf8_encode(cps, 0, cps.size()));
  }
  List items = v.iterate();
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items), false, /*lazy=*/true);
}

Value f_round(const Value& v, CallArgs& a) {
  Args p("round", a, {"precision", "method"});
  const std::int64_t prec = need_int(p.get(0, Value(0)), "precision");
  const std::string method = p.get(1, Value("common")).str();
  if (method != "common" && method != "ceil" && method != "floor")
    throw RenderError("FilterArgumentError: method must be common, ceil or floor");
  if (v.is_undefined()) v.raise_undefined();
  if (!v.is_number()) type_error("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.kind() != Kind::kFloat) return Value(v.as_int());
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<std::int64_t>(prec, 0, 300)), v.as_double());
    if (prec < 0) {
      const double m = std::pow(10.0, static_cast<double>(-prec));
      return Value(std::nearbyint(v.as_double() / m) * m);
    }
    return Value(std::stod(buf));
  }
  const double m = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_double() * m;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / m);
}

Value f_safe(const Value& v, CallArgs& a) {
  no_args("safe", a);
  return v.is_string() ? v : Value(v.str());
}

Value f_sort(const Value& v, CallArgs& a) {
  Args p("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool rev = p.get(0, Value(false)).truthy();
  const bool cs = p.get(1, Value(false)).truthy();
  const Value attribute = p.get(2, Value::none());
  List items = v.iterate();
  auto key = [&](const Value& x) { return fold(attribute.is_none() ? x : attr_path(x, attribute), cs); };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return rev ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value::list(std::move(items));
}

Value f_string(const Value& v, CallArgs& a) {
  no_args("string", a);
  return Value(v.str());
}

Value f_sum(const Value& v, CallArgs& a) {
  Args p("sum", a, {"attribute", "start"});
  const Value attribute = p.get(0, Value::none());
  Value total = p.get(1, Value(0));
  for (const Value& x : v.iterate()) total = binary_op("+", total, attribute.is_none() ? x : attr_path(x, attribute));
  return total;
}

Value f_title(const Value& v, CallArgs& a) {
  no_args("title", a);
  // jinja's title: words start after runs of whitespace, '-', '(', '{', '[', '<'.
  std::string out;
  bool word_start = true;
  for (char32_t c : utf8_decode(v.str())) {
    const bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      utf8_append(out, c);
      word_start = true;
    } else {
      utf8_append(out, word_start ? to_upper(c) : to_lower(c));
      word_start = false;
    }
  }
  return Value(out);
}

// HF transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
Value f_tojson(const Value& v, CallArgs& a) {
  Args p("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = p.get(0, Value(false)).truthy();
  const Value indent = p.get(1, Value::none());
  if (indent.is_string()) {
    o.indent_str = indent.as_string();
    o.has_indent_str = true;
  } else if (!indent.is_none()) {
    o.indent = static_cast<int>(std::max<std::int64_t>(0, need_int(indent, "indent")));
  }
  const Value seps = p.get(2, Value::none());
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.as_list().size() != 2) throw RenderError("ValueError: separators must be a (item, key) pair");
    o.item_sep = need_str(seps.as_list()[0], "item separator");
    o.key_sep = need_str(seps.as_list()[1], "key separator");
    o.has_item_sep = true;
  }
  o.sort_keys = p.get(3, Value(false)).truthy();
  return Value(json_dumps(v, o));
}

Value f_trim(const Value& v, CallArgs& a) {
  Args p("trim", a, {"chars"});
  return Value(str_strip(v.str(), p.get(0, Value::none()), true, true));
}

Value f_unique(const Value& v, CallArgs& a) {
  Args p("unique", a, {"case_sensitive", "attribute"});
  const bool cs = p.get(0, Value(false)).truthy();
  const Value attribute = p.get(1, Value::none());
  List out, seen;
  for (const Value& x : v.iterate()) {
    const Value k = fold(attribute.is_none() ? x : attr_path(x, attribute), cs);
    bool dup = false;
    for (const Value& s : seen) dup = dup || equal(s, k);
    if (!dup) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value::list(std::move(out), false, true);
}

Value f_wordcount(const Value& v, CallArgs& a) {
  no_args("wordcount", a);
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(v.str())) {
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool w = c == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                   cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO ||
                   cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_format(const Value& v, CallArgs& a) {
  if (!a.kw.empty() && !a.pos.empty()) throw RenderError("FilterArgumentError: can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Dict d;
    for (const auto& kv : a.kw) d.set(Value(kv.first), kv.second);
    return Value(percent_format(v.str(), Value::dict(std::move(d))));
  }
  return Value(percent_format(v.str(), Value::list(a.pos, true)));
}

Value f_select(const Value& v, CallArgs& a) { return select_impl(v, a, false, true); }
Value f_reject(const Value& v, CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, false); }

Value f_center(const Value& v, CallArgs& a) {
  Args p("center", a, {"width"});
  const std::string s = v.str();
  const std::int64_t w = need_int(p.get(0, Value(80)), "width");
  const std::int64_t len = Value(s).length();
  if (w <= len) return Value(s);
  const std::int64_t total = w - len;
  // Python's str.center puts the extra space on the right when len and width parity differ.
  const std::int64_t left = total / 2 + (total & w & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> m = {
      {"abs", f_abs},         {"attr", f_attr},       {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_count},
      {"d", f_default},       {"default", f_default}, {"dictsort", f_dictsort},
      {"e", f_escape},        {"escape", f_escape},   {"forceescape", f_escape},
      {"first", f_first},     {"float", f_float},     {"format", f_format},
      {"indent", f_indent},   {"int", f_int},         {"items", f_items},
      {"join", f_join},       {"last", f_last},       {"length", f_count},
      {"list", f_list},       {"lower", f_lower},     {"map", f_map},
      {"max", f_max},         {"min", f_min},         {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round},     {"safe", f_safe},       {"select", f_select},
      {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string},
      {"sum", f_sum},         {"title", f_title},     {"tojson", f_tojson},
      {"trim", f_trim},       {"unique", f_unique},   {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return m;
}

// ---------------------------------------------------------------------------
// Tests

Value arg0(const char* name, CallArgs& a) {
  Args p(name, a, {"other"});
  return p.get(0);
}

bool t_boolean(const Value& v, CallArgs& a) { return no_args("boolean", a), v.kind() == Kind::kBool; }
bool t_callable(const Value& v, CallArgs& a) { return no_args("callable", a), v.kind() == Kind::kFunction; }
bool t_defined(const Value& v, CallArgs& a) { return no_args("defined", a), !v.is_undefined(); }
bool t_undefined(const Value& v, CallArgs& a) { return no_args("undefined", a), v.is_undefined(); }
bool t_none(const Value& v, CallArgs& a) { return no_args("none", a), v.is_none(); }
bool t_string(const Value& v, CallArgs& a) { return no_args("string", a), v.is_string(); }
bool t_mapping(const Value& v, CallArgs& a) { return no_args("mapping", a), v.is_dict(); }
bool t_number(const Value& v, CallArgs& a) { return no_args("number", a), v.is_number(); }
bool t_integer(const Value& v, CallArgs& a) { return no_args("integer", a), v.kind() == Kind::kInt; }
bool t_float(const Value& v, CallArgs& a) { return no_args("float", a), v.kind() == Kind::kFloat; }
bool t_true(const Value& v, CallArgs& a) { return no_args("true", a), v.kind() == Kind::kBool && v.as_bool(); }
bool t_false(const Value& v, CallArgs& a) { return no_args("false", a), v.kind() == Kind::kBool && !v.as_bool(); }
bool t_escaped(const Value&, CallArgs& a) { return no_args("escaped", a), false; }
bool t_sequence(const Value& v, CallArgs& a) {
  no_args("sequence", a);
  return v.is_undefined() || v.is_string() || v.is_dict() || (v.is_list() && !v.is_lazy());
}
bool t_iterable(const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_undefined() || v.is_string() || v.is_dict() || v.is_list();
}
Value int_mod(const Value& v, std::int64_t m) { return binary_op("%", v, Value(m)); }
bool t_odd(const Value& v, CallArgs& a) {
  no_args("odd", a);
  return equal(int_mod(v, 2), Value(1));
}
bool t_even(const Value& v, CallArgs& a) {
  no_args("even", a);
  return equal(int_mod(v, 2), Value(0));
}
bool t_divisibleby(const Value& v, CallArgs& a) {
  const Value n = arg0("divisibleby", a);
  return equal(binary_op("%", v, n), Value(0));
}
bool t_eq(const Value& v, CallArgs& a) { return equal(v, arg0("eq", a)); }
bool t_ne(const Value& v, CallArgs& a) { return !equal(v, arg0("ne", a)); }
bool t_lt(const Value& v, CallArgs& a) { return less(v, arg0("lt", a)); }
bool t_gt(const Value& v, CallArgs& a) { return less(arg0("gt", a), v); }
bool t_le(const Value& v, CallArgs& a) {
  const Value o = arg0("le", a);
  return !less(o, v);
}
bool t_ge(const Value& v, CallArgs& a) {
  const Value o = arg0("ge", a);
  return !less(v, o);
}
bool t_in(const Value& v, CallArgs& a) {
  Args p("in", a, {"seq"});
  return contains(p.get(0), v);
}
bool t_sameas(const Value& v, CallArgs& a) {
  const Value o = arg0("sameas", a);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Kind::kNone:
    case Kind::kUndefined:
      return true;
    case Kind::kBool:
      return v.as_bool() == o.as_bool();
    case Kind::kList:
      return &v.as_list() == &o.as_list();
    case Kind::kDict:
      return &v.as_dict() == &o.as_dict();
    default:
      return equal(v, o);
  }
}
bool t_lower(const Value& v, CallArgs& a) { return no_args("lower", a), str_is_case(v.str(), false); }
bool t_upper(const Value& v, CallArgs& a) { return no_args("upper", a), str_is_case(v.str(), true); }
bool t_filter(const Value& v, CallArgs& a) { return no_args("filter", a), v.is_string() && find_filter(v.as_string()); }
bool t_test(const Value& v, CallArgs& a) { return no_args("test", a), v.is_string() && find_test(v.as_string()); }

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> m = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},
      {"undefined", t_undefined}, {"none", t_none}, {"string", t_string},
      {"mapping", t_mapping}, {"number", t_number}, {"integer", t_integer},
      {"float", t_float}, {"true", t_true}, {"false", t_false},
      {"escaped", t_escaped}, {"sequence", t_sequence}, {"iterable", t_iterable},
      {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
      {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"le", t_le}, {"<=", t_le},
      {"ge", t_ge}, {">=", t_ge}, {"in", t_in}, {"sameas", t_sameas},
      {"lower", t_lower}, {"upper", t_upper}, {"filter", t_filter}, {"test", t_test},
  };
  return m;
}

// ---------------------------------------------------------------------------
// Globals

constexpr std::int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value g_range(CallArgs& a) {
  if (!a.kw.empty()) type_error("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) type_error("range expected 1 to 3 arguments");
  std::int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = need_int(a.pos[0], "range");
  } else {
    start = need_int(a.pos[0], "range");
    stop = need_int(a.pos[1], "range");
    if (a.pos.size() == 3) step = need_int(a.pos[2], "range");
  }
  if (step == 0) throw RenderError("ValueError: range() arg 3 must not be zero");
  List out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(out.size()) >= kMaxRange)
      throw RenderError("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.emplace_back(i);
  }
  return Value::list(std::move(out));
}

Value g_dict(CallArgs& a) {
  Dict d;
  if (a.pos.size() > 1) type_error("dict expected at most 1 argument");
  if (!a.pos.empty()) {
    if (a.pos[0].is_dict()) {
      d = a.pos[0].as_dict();
    } else {
      for (const Value& pair : a.pos[0].iterate()) {
        const List kv = pair.iterate();
        if (kv.size() != 2) throw RenderError("ValueError: dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& kv : a.kw) d.set(Value(kv.first), kv.second);
  return Value::dict(std::move(d));
}

Value g_namespace(CallArgs& a) {
  auto ns = std::make_shared<Namespace>();
  if (a.pos.size() > 1) type_error("namespace expected at most 1 positional argument");
  if (!a.pos.empty()) {
    const Value d = g_dict(*std::make_unique<CallArgs>(CallArgs{{a.pos[0]}, {}}));
    for (const auto& kv : d.as_dict().items) ns->vars.set(kv.first, kv.second);
  }
  for (const auto& kv : a.kw) ns->set(kv.first, kv.second);
  return Value::object(ns);
}

Value g_raise_exception(CallArgs& a) {
  Args p("raise_exception", a, {"message"});
  throw RenderError(p.get(0).str(), /*raised_by_template=*/true);
}

Value g_strftime_now(CallArgs& a) {
  Args p("strftime_now", a, {"format"});
  const std::string fmt = need_str(p.get(0), "strftime_now format");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
  return Value(std::string(buf, n));
}

}  // namespace

// ---------------------------------------------------------------------------
// Public

Value Namespace::attr(const std::string& name) const {
  const Value* v = vars.find(name);
  return v ? *v : Object::attr(name);
}

std::string Namespace::repr() const { return "<Namespace " + Value::dict(vars).repr() + ">"; }

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) obj.raise_undefined();
  Value out;
  if (python_attr(obj, name, &out)) return out;
  if (item_lookup(obj, Value(name), &out)) return out;
  return Value::undefined(type_object(obj) + " has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.raise_undefined();
  Value out;
  if (item_lookup(obj, key, &out)) return out;
  if (key.is_string() && python_attr(obj, key.as_string(), &out)) return out;
  if (key.is_string()) return Value::undefined(type_object(obj) + " has no attribute '" + key.as_string() + "'");
  return Value::undefined(type_object(obj) + " has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) obj.raise_undefined();
  auto opt = [](const Value& v, const char* what) -> std::pair<bool, std::int64_t> {
    if (v.is_undefined() || v.is_none()) return {false, 0};
    return {true, need_int(v, what)};
  };
  // Pairs, not structured bindings: the lambda below captures them, which clang (the
  // fuzz build) rejects for bindings before C++20's P1091.
  const std::pair<bool, std::int64_t> start = opt(start_v, "slice indices must be integers or None");
  const std::pair<bool, std::int64_t> stop = opt(stop_v, "slice indices must be integers or None");
  const std::pair<bool, std::int64_t> step_opt = opt(step_v, "slice indices must be integers or None");
  const std::int64_t step = step_opt.first ? step_opt.second : 1;
  if (step == 0) throw RenderError("ValueError: slice step cannot be zero");
  auto indices = [&](std::int64_t n) {
    std::vector<std::int64_t> idx;
    auto clamp = [&](bool has, std::int64_t v, std::int64_t def) {
      if (!has) return def;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<std::int64_t>(v, 0, n);
      return std::clamp<std::int64_t>(v, -1, n - 1);
    };
    const std::int64_t b = clamp(start.first, start.second, step > 0 ? 0 : n - 1);
    const std::int64_t e = clamp(stop.first, stop.second, step > 0 ? n : -1);
    for (std::int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
    return idx;
  };
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::string out;
    if (is_ascii(s)) {
      for (std::int64_t i : indices(static_cast<std::int64_t>(s.size()))) out += s[static_cast<size_t>(i)];
      return Value(out);
    }
    const std::vector<char32_t> cps = utf8_decode(s);
    for (std::int64_t i : indices(static_cast<std::int64_t>(cps.size()))) utf8_append(out, cps[static_cast<size_t>(i)]);
    return Value(out);
  }
  if (obj.is_list() && !obj.is_lazy()) {
    const List& l = obj.as_list();
    List out;
    for (std::int64_t i : indices(static_cast<std::int64_t>(l.size()))) out.push_back(l[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_dict()) type_error("unhashable type: 'slice'");
  type_error("'" + obj.type_name() + "' object is not subscriptable");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) item.raise_undefined();
        type_error("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.as_list())
        if (equal(v, item)) return true;
      return false;
    case Kind::kDict:
      if (item.is_list() && !item.is_tuple()) type_error("unhashable type: 'list'");
      if (item.is_dict()) type_error("unhashable type: 'dict'");
      return container.as_dict().find(item) != nullptr;
    default:
      type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

namespace {

Value repeat(const Value& seq, std::int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(out);
  }
  List out;
  for (std::int64_t i = 0; i < n; ++i)
    for (const Value& v : seq.as_list()) out.push_back(v);
  return Value::list(std::move(out), seq.is_tuple());
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out;
    a.str_into(out);
    b.str_into(out);
    return Value(out);
  }
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  auto unsupported = [&]() -> Value {
    type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat);
  if (op == "+") {
    if (nums) return floats ? Value(a.as_double() + b.as_double()) : Value(a.as_int() + b.as_int());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && !a.is_lazy() && !b.is_lazy() && a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      for (const Value& v : b.as_list()) out.push_back(v);
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string() && !b.is_string()) type_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    return unsupported();
  }
  if (op == "-") {
    if (nums) return floats ? Value(a.as_double() - b.as_double()) : Value(a.as_int() - b.as_int());
    return unsupported();
  }
  if (op == "*") {
    if (nums) return floats ? Value(a.as_double() * b.as_double()) : Value(a.as_int() * b.as_int());
    const bool a_seq = a.is_string() || (a.is_list() && !a.is_lazy());
    const bool b_seq = b.is_string() || (b.is_list() && !b.is_lazy());
    if (a_seq && (b.kind() == Kind::kInt || b.kind() == Kind::kBool)) return repeat(a, b.as_int());
    if (b_seq && (a.kind() == Kind::kInt || a.kind() == Kind::kBool)) return repeat(b, a.as_int());
    return unsupported();
  }
  if (op == "/") {
    if (!nums) return unsupported();
    if (b.as_double() == 0) throw RenderError("ZeroDivisionError: division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b));
    if (!nums) return unsupported();
    if (floats) {
      const double x = a.as_double(), y = b.as_double();
      if (y == 0) throw RenderError(op == "%" ? "ZeroDivisionError: float modulo" : "ZeroDivisionError: float floor division by zero");
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return op == "%" ? Value(mod) : Value(floordiv);
    }
    if (b.as_int() == 0) throw RenderError(op == "%" ? "ZeroDivisionError: integer modulo by zero" : "ZeroDivisionError: integer division or modulo by zero");
    std::int64_t q = a.as_int() / b.as_int();
    std::int64_t r = a.as_int() % b.as_int();
    if (r != 0 && ((r < 0) != (b.as_int() < 0))) {
      --q;
      r += b.as_int();
    }
    return op == "//" ? Value(q) : Value(r);
  }
  if (op == "**") {
    if (!nums) return unsupported();
    if (!floats && b.as_int() >= 0) {
      std::int64_t r = 1;
      for (std::int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
      return Value(r);
    }
    if (a.as_double() == 0 && b.as_double() < 0) throw RenderError("ZeroDivisionError: 0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  throw RenderError("unknown operator " + op);
}

FilterFn find_filter(const std::string& name) {
  const auto& m = filters();
  auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

TestFn find_test(const std::string& name) {
  const auto& m = tests();
  auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

Value find_global(const std::string& name) {
  static const Value range = Value::function("range", g_range);
  static const Value dict = Value::function("dict", g_dict);
  static const Value ns = Value::function("namespace", g_namespace);
  static const Value raise = Value::function("raise_exception", g_raise_exception);
  static const Value now = Value::function("strftime_now", g_strftime_now);
  if (name == "range") return range;
  if (name == "dict") return dict;
  if (name == "namespace") return ns;
  if (name == "raise_exception") return raise;
  if (name == "strftime_now") return now;
  return Value::undefined(name);
}

}  // namespace agentr1::text::jinja
