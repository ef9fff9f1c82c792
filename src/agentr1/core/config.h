// agentr1/core/config.h — YAML config trees, dotted command-line overrides, and typed
// options structs that declare each field once.
//
//   // 1. An options struct: defaults + one visit() that names every field once.
//   struct OptimOptions {
//     double lr = 1e-6;            // learning rate
//     double weight_decay = 0.01;  // AdamW decoupled weight decay
//     template <class V> void visit(V& v) {
//       v.field("lr", lr, "learning rate");
//       v.field("weight_decay", weight_decay, "AdamW decoupled weight decay");
//     }
//     void validate() const {     // optional; called by bind_config after binding
//       AGENTR1_CHECK(lr > 0, "lr must be > 0, got " << lr);
//     }
//   };
//   struct ActorOptions {
//     OptimOptions optim;          // optimiser of the policy
//     double clip_ratio = 0.2;     // PPO clip range epsilon
//     template <class V> void visit(V& v) {
//       v.section("optim", optim, "optimiser of the policy");
//       v.field("clip_ratio", clip_ratio, "PPO clip range epsilon");
//     }
//   };
//
//   // 2. A tree: YAML file, then overrides (Hydra syntax) on top.
//   json tree = load_yaml_file("configs/grpo.yaml");
//   apply_override(tree, "actor.optim.lr=3e-6");   // key must exist
//   apply_override(tree, "+trainer.tags=[a, b]");  // '+' adds a new key
//
//   // 3. Typed options; unknown keys and wrong types fail with the dotted key.
//   ActorOptions actor = bind_config<ActorOptions>(tree, "actor");
//   std::ofstream(run_dir + "/config.yaml") << to_yaml(tree);  // resolved config
//   std::cerr << describe_config(ActorOptions{});     // --help-config
//
// Scalar typing follows the YAML 1.2 core schema (not PyYAML's YAML 1.1):
//   null, Null, NULL, ~, (empty)        -> null
//   true/True/TRUE, false/False/FALSE   -> bool   (yes/no/on/off stay strings)
//   [-+]?[0-9]+, 0o17, 0x1F             -> integer (int64; uint64 above; else double)
//   [-+]?(.5|1|1.|1.5)([eE][-+]?[0-9]+)? -> float  (so 1e-3 and 1e6 are floats)
//   .inf, -.inf, .nan (any of .inf/.Inf/.INF)  -> float
//   anything else, and every quoted or block scalar -> string ('1e-3' is a string).
// Explicit tags !!str, !!int, !!float, !!bool, !!null are honoured.
//
// Binding rules (bind_config / bind_into): a key present in the tree replaces the
// default; a missing key keeps it; a null section keeps its defaults. Integers fill
// floating fields; floats with an integral value (1e3) fill integer fields; strings are
// never converted (quote nothing, coerce nothing). Lists and maps replace the default
// whole. All problems (unknown keys, wrong types, validate() failures) are collected
// and thrown together as one agentr1::Error, one line per problem.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/json.h"

namespace agentr1 {

// ---------------------------------------------------------------------------------
// Trees

// Parses one YAML document into an ordered JSON tree (maps keep file order; keys are
// the scalar text). Throws Error with line:column on a syntax error, on duplicate map
// keys, on non-scalar map keys, on unknown tags, and on more than one document.
// An empty document gives null.
json yaml_to_json(const std::string& yaml_text);

// Reads and parses a YAML file (as yaml_to_json). Throws Error naming the path if it
// cannot be read or parsed. An empty file gives an empty map.
json load_yaml_file(const std::string& path);

// Block-style YAML for a tree; yaml_to_json(to_yaml(t)) == t for every tree whose
// floats are finite (inf/nan are written as .inf/.nan and read back as such; JSON
// cannot hold them, so they only round-trip in memory). Strings that would read back
// as another type ("true", "1e-3", "") are quoted.
std::string to_yaml(const json& tree);

// Applies one Hydra-style override to the tree:
//   a.b.c=value    set an existing key (error if missing, naming the nearest key)
//   +a.b.c=value   add a key that does not exist yet (error if it exists)
//   ++a.b.c=value  set or add
//   ~a.b.c         delete an existing key
// A path segment that is a number indexes into a list (a.list.0=5). The value is
// parsed by parse_override_value. A map value is deep-merged into an existing map
// (as Hydra does; by merge_json, so a spec of another "type" replaces); anything else
// replaces. Mutates `tree`; throws Error on failure
// (the tree is unchanged then).
void apply_override(json& tree, const std::string& dotted_assignment);
void apply_overrides(json& tree, const std::vector<std::string>& dotted_assignments);

// Value text of an override, YAML-style: empty -> "" (Hydra), [..] and {..} -> YAML
// flow list/map, '..' and ".." -> string, anything else a core-schema plain scalar
// (3 -> int, 3.0 / 1e-3 -> float, true -> bool, null -> null, abc -> "abc").
// Throws Error on a malformed list, map or quoted string.
json parse_override_value(const std::string& text);

// Deep merge: maps merge key by key (recursively), anything else in `overlay`
// replaces what is in `base`. One exception: a map with a "type" key is a registry spec
// (context policy, reward, ...), and an overlay spec whose "type" differs replaces the
// base spec whole, since the old type's options mean nothing to the new one:
//   base    {context: {type: sliding_window, keep_last: 4}}
//   overlay {context: {type: token_budget, max_prompt_tokens: 420}}
//   result  {context: {type: token_budget, max_prompt_tokens: 420}}
// (an overlay of the same type, or without a type, merges key by key as usual).
void merge_json(json& base, const json& overlay);

// Resolves plain (unquoted) scalar text with the YAML 1.2 core schema (see above).
json resolve_yaml_scalar(const std::string& text);

// ---------------------------------------------------------------------------------
// Helpers shared by the templates below (and useful for any "unknown name" error)

// Optimal-string-alignment edit distance (insert, delete, substitute, swap adjacent).
std::size_t edit_distance(const std::string& a, const std::string& b);

// Dotted paths of every map key in the tree, depth first, parents before children
// (lists are not descended into).
std::vector<std::string> json_key_paths(const json& tree);

// A short rendering of a value for error messages: strings quoted, containers
// compact and cut at ~80 characters.
std::string describe_value(const json& v);

// The message for an unknown key `key` under `parent` (dotted, "" for the root):
//   rest       path segments the user wrote below the unknown key (may be empty)
//   siblings   the valid keys under `parent`
//   all_keys   every valid dotted key (any depth), to find the key in another section
// Suggests, in order: valid keys that end with "<key>.<rest...>" or "<key>" in another
// section; else the nearest sibling by edit distance when it is within
// max(2, len(key)/2) edits (a likely typo). Always lists the valid siblings.
std::string unknown_key_message(const std::string& parent, const std::string& key,
                                const std::vector<std::string>& rest,
                                const std::vector<std::string>& siblings,
                                const std::vector<std::string>& all_keys);

// ---------------------------------------------------------------------------------
// Typed binding

namespace config_detail {

inline std::string join_key(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// One row of describe_config: a field or a section.
struct Entry {
  std::string key;       // full dotted key ("actor.optim.lr"; list elements "tools[].name")
  std::string type;      // "double", "list[int]", "section", ...
  json default_value;    // null for sections
  std::string doc;
  bool is_section = false;
};

// Shared state of one bind_config call.
struct BindContext {
  std::vector<std::string> errors;
  std::vector<std::string> all_keys;  // every valid dotted key of the schema
};

// Detects `template <class V> void visit(V&)` on a struct.
struct ProbeVisitor {
  template <class U>
  void field(const std::string&, U&, const std::string& = "") {}
  template <class U>
  void section(const std::string&, U&, const std::string& = "") {}
};
template <class T, class = void>
struct has_visit : std::false_type {};
template <class T>
struct has_visit<T, std::void_t<decltype(std::declval<T&>().visit(std::declval<ProbeVisitor&>()))>>
    : std::true_type {};
template <class T, class = void>
struct has_validate : std::false_type {};
template <class T>
struct has_validate<T, std::void_t<decltype(std::declval<const T&>().validate())>>
    : std::true_type {};

template <class T>
struct dependent_false : std::false_type {};

// Non-template pieces (config.cpp).
std::string type_error(const std::string& key, const char* expected, const json& found);
json float_to_json(float f);  // shortest decimal that reads back as the same float

// Codec<T>: how one field type is read from / written to a tree and described.
template <class T, class = void>
struct Codec {
  static_assert(dependent_false<T>::value,
                "unsupported config field type: use bool, an integer type, float, double, "
                "std::string, json, std::vector<T>, std::map<std::string, T>, or a struct "
                "with template <class V> void visit(V&)");
};

template <>
struct Codec<bool> {
  static std::string type_name() { return "bool"; }
  static void read(const json& v, bool& out, const std::string& key, BindContext& ctx) {
    if (v.is_boolean()) {
      out = v.get<bool>();
    } else {
      ctx.errors.push_back(type_error(key, "a bool (true or false)", v));
    }
  }
  static json write(const bool& x) { return x; }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value>> {
  static std::string type_name() {
    if (std::is_same<T, int>::value) return "int";
    return std::string(std::is_signed<T>::value ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }
  static void read(const json& v, T& out, const std::string& key, BindContext& ctx) {
    using L = std::numeric_limits<T>;
    const std::string what = "an integer in [" + std::to_string(L::min()) + ", " +
                             std::to_string(L::max()) + "]";
    if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(L::max())) {
        out = static_cast<T>(u);
        return;
      }
    } else if (v.is_number_integer()) {
      const std::int64_t i = v.get<std::int64_t>();
      const bool ok = std::is_signed<T>::value
                          ? (i >= static_cast<std::int64_t>(L::min()) &&
                             i <= static_cast<std::int64_t>(L::max()))
                          : (i >= 0 && static_cast<std::uint64_t>(i) <=
                                           static_cast<std::uint64_t>(L::max()));
      if (ok) {
        out = static_cast<T>(i);
        return;
      }
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      // 1e3 is a float in YAML; accept it when it is an exact integer in range.
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(L::min()) &&
          d < 2.0 * (static_cast<double>(L::max() / 2 + 1))) {
        out = static_cast<T>(d);
        return;
      }
    }
    ctx.errors.push_back(type_error(key, what.c_str(), v));
  }
  static json write(const T& x) { return x; }
};

template <class T>
struct Codec<T, std::enable_if_t<std::is_floating_point<T>::value>> {
  static std::string type_name() { return std::is_same<T, float>::value ? "float" : "double"; }
  static void read(const json& v, T& out, const std::string& key, BindContext& ctx) {
    if (v.is_number()) {
      out = static_cast<T>(v.get<double>());
    } else {
      ctx.errors.push_back(type_error(key, "a number", v));
    }
  }
  static json write(const T& x) {
    if (std::is_same<T, float>::value) return float_to_json(static_cast<float>(x));
    return static_cast<double>(x);
  }
};

template <>
struct Codec<std::string> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, std::string& out, const std::string& key, BindContext& ctx) {
    if (v.is_string()) {
      out = v.get<std::string>();
    } else {
      ctx.errors.push_back(type_error(key, "a string", v));
    }
  }
  static json write(const std::string& x) { return x; }
};

template <>
struct Codec<json> {
  static std::string type_name() { return "any"; }
  static void read(const json& v, json& out, const std::string&, BindContext&) { out = v; }
  static json write(const json& x) { return x; }
};

template <class T>
void bind_struct(const json& node, T& obj, const std::string& prefix, BindContext& ctx);
template <class T>
json dump_struct(const T& obj);
template <class T>
void describe_struct(const T& obj, const std::string& prefix, std::vector<Entry>& out);

template <class T>
struct Codec<T, std::enable_if_t<has_visit<T>::value>> {
  static std::string type_name() { return "section"; }
  static void read(const json& v, T& out, const std::string& key, BindContext& ctx) {
    bind_struct(v, out, key, ctx);
  }
  static json write(const T& x) { return dump_struct(x); }
};

template <class U>
struct Codec<std::vector<U>> {
  static std::string type_name() { return "list[" + Codec<U>::type_name() + "]"; }
  static void read(const json& v, std::vector<U>& out, const std::string& key,
                   BindContext& ctx) {
    if (!v.is_array()) {
      ctx.errors.push_back(type_error(key, ("a list of " + Codec<U>::type_name()).c_str(), v));
      return;
    }
    std::vector<U> result;
    result.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      U item{};
      Codec<U>::read(v[i], item, key + "[" + std::to_string(i) + "]", ctx);
      result.push_back(std::move(item));
    }
    out = std::move(result);
  }
  static json write(const std::vector<U>& x) {
    json a = json::array();
    for (const auto& e : x) a.push_back(Codec<U>::write(e));
    return a;
  }
};

template <class U>
struct Codec<std::map<std::string, U>> {
  static std::string type_name() { return "map[string, " + Codec<U>::type_name() + "]"; }
  static void read(const json& v, std::map<std::string, U>& out, const std::string& key,
                   BindContext& ctx) {
    if (!v.is_object()) {
      ctx.errors.push_back(
          type_error(key, ("a map of string to " + Codec<U>::type_name()).c_str(), v));
      return;
    }
    std::map<std::string, U> result;
    for (auto it = v.begin(); it != v.end(); ++it) {
      U item{};
      Codec<U>::read(it.value(), item, join_key(key, it.key()), ctx);
      result.emplace(it.key(), std::move(item));
    }
    out = std::move(result);
  }
  static json write(const std::map<std::string, U>& x) {
    json o = json::object();
    for (const auto& kv : x) o[kv.first] = Codec<U>::write(kv.second);
    return o;
  }
};

// Fills fields of one struct from one map node and reports keys nobody claimed.
class Binder {
 public:
  Binder(const json& node, std::string prefix, BindContext& ctx)
      : node_(node), prefix_(std::move(prefix)), ctx_(ctx) {}

  template <class U>
  void field(const std::string& name, U& ref, const std::string& doc = "") {
    (void)doc;
    AGENTR1_CHECK(known_set_.insert(name).second,
                  "options struct at '" << prefix_ << "' declares field '" << name
                                        << "' twice in visit()");
    known_.push_back(name);
    auto it = node_.find(name);
    if (it == node_.end()) return;
    Codec<U>::read(*it, ref, join_key(prefix_, name), ctx_);
  }
  template <class U>
  void section(const std::string& name, U& ref, const std::string& doc = "") {
    static_assert(has_visit<U>::value, "section() needs a struct with visit(); use field()");
    field(name, ref, doc);
  }

  // Reports every key of the node that no field() claimed.
  void finish() {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (known_set_.count(it.key())) continue;
      std::vector<std::string> rest;
      const json* v = &it.value();
      while (v->is_object() && !v->empty()) {  // the first leaf path the user wrote
        rest.push_back(v->begin().key());
        v = &v->begin().value();
      }
      ctx_.errors.push_back(unknown_key_message(prefix_, it.key(), rest, known_, ctx_.all_keys));
    }
  }

 private:
  const json& node_;
  std::string prefix_;
  BindContext& ctx_;
  std::vector<std::string> known_;
  std::set<std::string> known_set_;
};

class Dumper {
 public:
  template <class U>
  void field(const std::string& name, U& ref, const std::string& = "") {
    out[name] = Codec<U>::write(ref);
  }
  template <class U>
  void section(const std::string& name, U& ref, const std::string& doc = "") {
    field(name, ref, doc);
  }
  json out = json::object();
};

// Entry rows for one field type (scalars: one row; structs: a row + their fields).
template <class U>
struct Describe {
  static void run(const U& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
    out.push_back(Entry{key, Codec<U>::type_name(), Codec<U>::write(value), doc, false});
  }
};
template <class U>
struct DescribeStruct {
  static void run(const U& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
    out.push_back(Entry{key, "section", json(), doc, true});
    describe_struct(value, key, out);
  }
};
template <class U>
struct DescribeStructList {
  static void run(const std::vector<U>& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
    out.push_back(Entry{key, Codec<std::vector<U>>::type_name(),
                        Codec<std::vector<U>>::write(value), doc, false});
    describe_struct(U{}, key + "[]", out);  // element fields, with element defaults
  }
};

template <class U>
struct DescribeStructMap {
  static void run(const std::map<std::string, U>& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
    out.push_back(Entry{key, Codec<std::map<std::string, U>>::type_name(),
                        Codec<std::map<std::string, U>>::write(value), doc, false});
    describe_struct(U{}, key + ".<name>", out);  // value fields, with value defaults
  }
};

template <class U>
void describe_one(const U& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
  if constexpr (has_visit<U>::value) {
    DescribeStruct<U>::run(value, key, doc, out);
  } else {
    Describe<U>::run(value, key, doc, out);
  }
}
template <class U>
void describe_one(const std::vector<U>& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
  if constexpr (has_visit<U>::value) {
    DescribeStructList<U>::run(value, key, doc, out);
  } else {
    Describe<std::vector<U>>::run(value, key, doc, out);
  }
}
template <class U>
void describe_one(const std::map<std::string, U>& value, const std::string& key, const std::string& doc,
                  std::vector<Entry>& out) {
  if constexpr (has_visit<U>::value) {
    DescribeStructMap<U>::run(value, key, doc, out);
  } else {
    Describe<std::map<std::string, U>>::run(value, key, doc, out);
  }
}

class Describer {
 public:
  Describer(std::string prefix, std::vector<Entry>& out) : prefix_(std::move(prefix)), out_(out) {}
  template <class U>
  void field(const std::string& name, U& ref, const std::string& doc = "") {
    const std::string key = join_key(prefix_, name);
    AGENTR1_CHECK(names_.insert(name).second,
                  "options struct declares '" << key << "' twice in visit()");
    describe_one(static_cast<const U&>(ref), key, doc, out_);
  }
  template <class U>
  void section(const std::string& name, U& ref, const std::string& doc = "") {
    field(name, ref, doc);
  }

 private:
  std::string prefix_;
  std::vector<Entry>& out_;
  std::set<std::string> names_;
};

// visit() is non-const (it hands out references for binding); the dumper and the
// describer only read through them.
template <class T>
T& visit_target(const T& obj) {
  return const_cast<T&>(obj);
}

template <class T>
json dump_struct(const T& obj) {
  Dumper d;
  visit_target(obj).visit(d);
  return std::move(d.out);
}

template <class T>
void describe_struct(const T& obj, const std::string& prefix, std::vector<Entry>& out) {
  Describer d(prefix, out);
  visit_target(obj).visit(d);
}

template <class T>
void bind_struct(const json& node, T& obj, const std::string& prefix, BindContext& ctx) {
  if (node.is_null()) return;  // "actor:" with nothing below keeps the defaults
  if (!node.is_object()) {
    ctx.errors.push_back(type_error(prefix.empty() ? "config" : prefix, "a map", node));
    return;
  }
  const std::size_t errors_before = ctx.errors.size();
  Binder b(node, prefix, ctx);
  obj.visit(b);
  b.finish();
  if constexpr (has_validate<T>::value) {
    if (ctx.errors.size() == errors_before) {
      try {
        obj.validate();
      } catch (const std::exception& e) {
        ctx.errors.push_back(prefix.empty() ? std::string(e.what()) : prefix + ": " + e.what());
      }
    }
  }
}

// The subtree at a dotted prefix, or null if any part is missing.
const json& subtree_at(const json& tree, const std::string& dotted_prefix);

// Throws the collected errors as one Error (no-op when there are none).
void throw_if_errors(const std::vector<std::string>& errors);

// Renders describe_config's table.
std::string format_entries(const std::vector<Entry>& entries);

}  // namespace config_detail

// Fills `obj` from the subtree at `path_prefix` ("" = the whole tree; "actor" or
// "actor.optim" select a section; a missing section keeps every default). Keys not in
// the tree keep the values already in `obj`. Calls validate() on each struct that has
// one (own fields only; messages get the section's dotted prefix). Throws one Error
// listing every unknown key (with the nearest valid key), type error and validation
// failure. `obj` may be partly filled when it throws.
template <class T>
void bind_into(T& obj, const json& tree, const std::string& path_prefix = "") {
  static_assert(config_detail::has_visit<T>::value,
                "bind_into needs a struct with template <class V> void visit(V&)");
  config_detail::BindContext ctx;
  std::vector<config_detail::Entry> entries;
  config_detail::describe_struct(obj, path_prefix, entries);
  for (const auto& e : entries) {
    if (e.key.find("[]") == std::string::npos) ctx.all_keys.push_back(e.key);
  }
  config_detail::bind_struct(config_detail::subtree_at(tree, path_prefix), obj, path_prefix, ctx);
  config_detail::throw_if_errors(ctx.errors);
}

// A T with its defaults overridden by the tree (see bind_into).
template <class T>
T bind_config(const json& tree, const std::string& path_prefix = "") {
  T obj{};
  bind_into(obj, tree, path_prefix);
  return obj;
}

// Every field of `obj` (nested sections as maps), in visit() order. Binding the result
// gives back an equal struct; to_yaml of it is a complete, commented-out-free config.
template <class T>
json config_to_json(const T& obj) {
  static_assert(config_detail::has_visit<T>::value,
                "config_to_json needs a struct with template <class V> void visit(V&)");
  return config_detail::dump_struct(obj);
}

// One line per dotted key: key, type, current value of `obj` (its defaults for T{}),
// doc. Sections get a line with their doc. For --help-config.
template <class T>
std::string describe_config(const T& obj, const std::string& path_prefix = "") {
  std::vector<config_detail::Entry> entries;
  config_detail::describe_struct(obj, path_prefix, entries);
  return config_detail::format_entries(entries);
}

}  // namespace agentr1
