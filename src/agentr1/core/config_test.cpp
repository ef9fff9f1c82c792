#include "agentr1/core/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"

namespace agentr1 {
namespace {

// The agentr1::Error message of fn(); a test failure when it throws none.
template <class Fn>
std::string error_of(Fn&& fn) {
  const std::string e = agentr1::testing::error_of(std::forward<Fn>(fn));
  if (e.empty()) ADD_FAILURE() << "expected agentr1::Error";
  return e;
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)
#define EXPECT_LACKS(haystack, needle) \
  EXPECT_EQ(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

// ---------------------------------------------------------------- options structs

struct OptimOptions {
  double lr = 1e-6;            // learning rate
  double weight_decay = 0.01;  // AdamW decoupled weight decay
  std::vector<double> betas{0.9, 0.999};  // AdamW betas
  template <class V>
  void visit(V& v) {
    v.field("lr", lr, "learning rate");
    v.field("weight_decay", weight_decay, "AdamW decoupled weight decay");
    v.field("betas", betas, "AdamW betas");
  }
  void validate() const { AGENTR1_CHECK(lr > 0, "lr must be > 0, got " << lr); }
};

struct ActorOptions {
  OptimOptions optim;        // optimiser of the policy
  double clip_ratio = 0.2;   // PPO clip range
  int ppo_epochs = 1;        // passes over each batch
  float entropy_coeff = 0.001f;  // entropy bonus
  template <class V>
  void visit(V& v) {
    v.section("optim", optim, "optimiser of the policy");
    v.field("clip_ratio", clip_ratio, "PPO clip range");
    v.field("ppo_epochs", ppo_epochs, "passes over each batch");
    v.field("entropy_coeff", entropy_coeff, "entropy bonus");
  }
};

struct ToolOptions {
  std::string name = "search";  // tool name
  int timeout_s = 10;           // per-call timeout
  template <class V>
  void visit(V& v) {
    v.field("name", name, "tool name");
    v.field("timeout_s", timeout_s, "per-call timeout");
  }
};

struct RolloutOptions {
  int n = 1;                          // samples per prompt
  double temperature = 1.0;           // sampling temperature
  std::string mode = "sync";          // sync | async (validated by validate())
  bool do_sample = true;              // sample vs greedy
  std::int64_t max_tokens = 1024;     // response budget
  std::uint64_t seed_offset = 0;      // added to the run seed
  std::vector<std::string> stop{};    // stop strings
  std::vector<ToolOptions> tools{};   // tools offered to the policy
  std::map<std::string, double> reward_weights{{"format", 0.1}};  // per-reward weights
  json engine_kwargs = json::object();  // free-form engine arguments
  std::map<std::string, ToolOptions> named_tools{};  // tools by name (a map of sections)
  template <class V>
  void visit(V& v) {
    v.field("n", n, "samples per prompt");
    v.field("temperature", temperature, "sampling temperature");
    v.field("mode", mode, "sync | async");
    v.field("do_sample", do_sample, "sample vs greedy");
    v.field("max_tokens", max_tokens, "response budget");
    v.field("seed_offset", seed_offset, "added to the run seed");
    v.field("stop", stop, "stop strings");
    v.field("tools", tools, "tools offered to the policy");
    v.field("reward_weights", reward_weights, "per-reward weights");
    v.field("engine_kwargs", engine_kwargs, "free-form engine arguments");
    v.field("named_tools", named_tools, "tools by name");
  }
  void validate() const {
    AGENTR1_CHECK(mode == "sync" || mode == "async",
                  "mode must be sync or async, got '" << mode << "'");
  }
};

struct RootOptions {
  ActorOptions actor;
  RolloutOptions rollout;
  std::string experiment = "exp";  // run name
  template <class V>
  void visit(V& v) {
    v.section("actor", actor, "the policy");
    v.section("rollout", rollout, "generation");
    v.field("experiment", experiment, "run name");
  }
};

// ---------------------------------------------------------------- YAML -> JSON

TEST(YamlToJson, ScalarsFollowYaml12CoreSchema) {
  json t = yaml_to_json(R"(
i: 42
neg: -7
plus: +3
octal: 0o17
hex: 0x1F
big: 18446744073709551615
f: 3.5
sci: 1e-3
sci2: 2E+6
dot: .5
trail: 1.
inf: .inf
ninf: -.Inf
nan: .nan
t: true
T: True
f2: FALSE
yes_word: yes
off_word: off
n1: null
n2: ~
n3:
s: hello world
quoted_num: "1e-3"
single: '42'
tagged: !!str 123
tagged_f: !!float 3
version: 1.2.3
)");
  EXPECT_EQ(t["i"], json(42));
  EXPECT_TRUE(t["i"].is_number_integer());
  EXPECT_EQ(t["neg"].get<int>(), -7);
  EXPECT_EQ(t["plus"].get<int>(), 3);
  EXPECT_EQ(t["octal"].get<int>(), 15);
  EXPECT_EQ(t["hex"].get<int>(), 31);
  EXPECT_TRUE(t["big"].is_number_unsigned());
  EXPECT_EQ(t["big"].get<std::uint64_t>(), 18446744073709551615ULL);
  EXPECT_TRUE(t["f"].is_number_float());
  EXPECT_EQ(t["f"].get<double>(), 3.5);
  EXPECT_TRUE(t["sci"].is_number_float());  // YAML 1.2: 1e-3 is a float (PyYAML says str)
  EXPECT_EQ(t["sci"].get<double>(), 0.001);
  EXPECT_EQ(t["sci2"].get<double>(), 2e6);
  EXPECT_EQ(t["dot"].get<double>(), 0.5);
  EXPECT_EQ(t["trail"].get<double>(), 1.0);
  EXPECT_TRUE(t["trail"].is_number_float());
  EXPECT_TRUE(std::isinf(t["inf"].get<double>()) && t["inf"].get<double>() > 0);
  EXPECT_TRUE(std::isinf(t["ninf"].get<double>()) && t["ninf"].get<double>() < 0);
  EXPECT_TRUE(std::isnan(t["nan"].get<double>()));
  EXPECT_EQ(t["t"], json(true));
  EXPECT_EQ(t["T"], json(true));
  EXPECT_EQ(t["f2"], json(false));
  EXPECT_EQ(t["yes_word"], json("yes"));  // YAML 1.1 bool words stay strings
  EXPECT_EQ(t["off_word"], json("off"));
  EXPECT_TRUE(t["n1"].is_null());
  EXPECT_TRUE(t["n2"].is_null());
  EXPECT_TRUE(t["n3"].is_null());
  EXPECT_EQ(t["s"], json("hello world"));
  EXPECT_EQ(t["quoted_num"], json("1e-3"));
  EXPECT_EQ(t["single"], json("42"));
  EXPECT_EQ(t["tagged"], json("123"));
  EXPECT_TRUE(t["tagged_f"].is_number_float());
  EXPECT_EQ(t["version"], json("1.2.3"));
}

TEST(YamlToJson, ListsMapsNestingAndOrder) {
  json t = yaml_to_json(R"(
zeta: 1
alpha:
  beta: [1, 2.5, x]
  gamma:
    - a: 1
      b: [true, null]
    - - nested
      - list
  empty_list: []
  empty_map: {}
flow: {k: v, n: 3}
block: |
  line one
  line two
)");
  // Ordered: file order, not alphabetical.
  std::vector<std::string> keys;
  for (auto it = t.begin(); it != t.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "flow", "block"}));
  EXPECT_EQ(t["alpha"]["beta"], json::parse(R"([1, 2.5, "x"])"));
  EXPECT_EQ(t["alpha"]["gamma"], json::parse(R"([{"a": 1, "b": [true, null]}, ["nested", "list"]])"));
  EXPECT_EQ(t["alpha"]["empty_list"], json::array());
  EXPECT_EQ(t["alpha"]["empty_map"], json::object());
  EXPECT_EQ(t["flow"], json::parse(R"({"k": "v", "n": 3})"));
  EXPECT_EQ(t["block"], json("line one\nline two\n"));
}

TEST(YamlToJson, EmptyDocumentAndTopLevelScalar) {
  EXPECT_TRUE(yaml_to_json("").is_null());
  EXPECT_TRUE(yaml_to_json("# only a comment\n").is_null());
  EXPECT_EQ(yaml_to_json("7"), json(7));
  EXPECT_EQ(yaml_to_json("[a, 1]"), json::parse(R"(["a", 1])"));
}

TEST(YamlToJson, ErrorsNameLineAndRule) {
  std::string m = error_of([] { yaml_to_json("a: 1\nb: [1, 2\n"); });
  EXPECT_HAS(m, "YAML syntax error");
  EXPECT_HAS(m, "line");
  m = error_of([] { yaml_to_json("a: 1\nb: 2\na: 3\n"); });
  EXPECT_HAS(m, "duplicate key 'a'");
  EXPECT_HAS(m, "line 3");
  m = error_of([] { yaml_to_json("a: 1\n---\nb: 2\n"); });
  EXPECT_HAS(m, "more than one document");
  // yaml-cpp alone never returns on this text (an empty document that consumes nothing).
  m = error_of([] { yaml_to_json(",: 1\n"); });
  EXPECT_HAS(m, "YAML syntax error at line 1, column 1: unexpected ','");
  m = error_of([] { yaml_to_json("a: 1\n,: 4\n"); });
  EXPECT_HAS(m, "YAML syntax error");
  m = error_of([] { yaml_to_json("a: 1\nb: caf\xe9\n"); });  // Latin-1, not UTF-8
  EXPECT_HAS(m, "not valid UTF-8: byte 0xE9 at line 2, column 7");
  m = error_of([] { yaml_to_json("\xed\xa0\x80: 1\n"); });  // a UTF-16 surrogate
  EXPECT_HAS(m, "byte 0xED at line 1, column 1");
  EXPECT_EQ(yaml_to_json("k: \"caf\xc3\xa9 \xf0\x9f\x98\x80\"\n")["k"], "caf\xc3\xa9 \xf0\x9f\x98\x80");
  m = error_of([] { yaml_to_json(std::string("a\0b: 1\n", 7)); });  // e.g. a UTF-16 file
  EXPECT_HAS(m, "control character 0x00 at line 1, column 2");
  EXPECT_HAS(m, "UTF-16 or UTF-32 file must be saved as UTF-8");
  m = error_of([] { yaml_to_json("a: \"\\ud800\"\n"); });  // an escape naming no character
  EXPECT_HAS(m, "YAML syntax error at line 1");
  // Control characters in a string survive to_yaml and back (escaped, not raw).
  const json ctl = {{"k", std::string("x\x01y\x7f\x1b")}};
  EXPECT_EQ(yaml_to_json(to_yaml(ctl)), ctl);
  json t = json::object();
  m = error_of([&] { apply_override(t, "++a=\xff"); });
  EXPECT_HAS(m, "override is not valid UTF-8: byte 0xFF at offset 4");
  m = error_of([] { yaml_to_json("a: !!int abc\n"); });
  EXPECT_HAS(m, "'abc' is not a valid tag:yaml.org,2002:int");
  m = error_of([] { yaml_to_json("a: !custom 1\n"); });
  EXPECT_HAS(m, "unsupported tag");
  m = error_of([] { yaml_to_json("[1, 2]: x\n"); });
  EXPECT_HAS(m, "map keys must be plain scalars");
}

TEST(YamlToJson, LoadFileAndMissingFile) {
  const std::string path = ::testing::TempDir() + "agentr1_config_test_load.yaml";
  {
    std::ofstream f(path);
    f << "trainer:\n  total_epochs: 3\n";
  }
  EXPECT_EQ(load_yaml_file(path), json::parse(R"({"trainer": {"total_epochs": 3}})"));
  {
    std::ofstream f(path);  // empty file
  }
  EXPECT_EQ(load_yaml_file(path), json::object());
  {
    std::ofstream f(path);
    f << "a: [\n";
  }
  std::string m = error_of([&] { load_yaml_file(path); });
  EXPECT_HAS(m, path);
  EXPECT_HAS(m, "YAML syntax error");
  std::remove(path.c_str());
  m = error_of([] { load_yaml_file("/nonexistent/dir/x.yaml"); });
  EXPECT_HAS(m, "cannot open config file '/nonexistent/dir/x.yaml'");
  m = error_of([] { load_yaml_file(::testing::TempDir()); });
  EXPECT_HAS(m, "is a directory");
}

// Aliases make YAML a graph: one that refers to itself, or a bomb of aliases, is an
// error naming the place, never a crash (both in files and in override values).
TEST(YamlToJson, SelfReferencingAliasesAndAliasBombsAreErrors) {
  std::string m = error_of([] { yaml_to_json("a: &x [*x]\n"); });
  EXPECT_HAS(m, "nested deeper than 64 levels");
  EXPECT_HAS(m, "line 1");
  EXPECT_HAS(m, "alias that refers to itself");
  m = error_of([] { yaml_to_json("a: &x {b: *x}\n"); });
  EXPECT_HAS(m, "nested deeper than 64 levels");
  // 10 levels of 10 aliases each: 10^10 values once expanded.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    bomb += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *l" : "*l") + std::to_string(i - 1);
    bomb += "]\n";
  }
  m = error_of([&] { yaml_to_json(bomb); });
  EXPECT_HAS(m, "more than 1000000 values");
  // Aliases that expand to a sane tree still work.
  EXPECT_EQ(yaml_to_json("a: &x [1, 2]\nb: *x\n"), json::parse(R"({"a": [1, 2], "b": [1, 2]})"));
  json tree = json::object();
  m = error_of([&] { apply_override(tree, "+a=[&x [*x]]"); });
  EXPECT_HAS(m, "nested deeper than 64 levels");
}

// ---------------------------------------------------------------- to_yaml round trip

TEST(ToYaml, WritesReadableBlockYaml) {
  json t = json::parse(R"({"a": 1, "b": {"c": [1, 2], "d": "x"}, "e": [], "f": {}})");
  EXPECT_EQ(to_yaml(t),
            "a: 1\n"
            "b:\n"
            "  c:\n"
            "    - 1\n"
            "    - 2\n"
            "  d: x\n"
            "e: []\n"
            "f: {}\n");
  EXPECT_EQ(to_yaml(json::parse(R"([{"a": 1, "b": 2}, [3, 4]])")),
            "- a: 1\n"
            "  b: 2\n"
            "- - 3\n"
            "  - 4\n");
}

TEST(ToYaml, RoundTripsTrickyValues) {
  json t = json::object();
  t["int"] = 3;
  t["negative"] = -9223372036854775807LL - 1;
  t["unsigned"] = 18446744073709551615ULL;
  t["float_integral"] = 2.0;  // must stay a float
  t["float_small"] = 1e-6;
  t["float_big"] = 1.5e300;
  t["neg_zero"] = -0.0;
  t["pi"] = 3.141592653589793;
  t["bool"] = false;
  t["null"] = nullptr;
  // Strings that would read back as something else unless quoted.
  for (const char* s : {"", " ", "true", "False", "null", "~", "yes", "off", "42", "1e-3", "-1",
                        ".inf", ".nan", "0x1F", "1.2.3", "a: b", "a #b", "#c", "- x", "[x]",
                        "{x}", "x,y", "'q'", "\"dq\"", "tab\there", "new\nline", "cr\rx",
                        "back\\slash", "trail ", "colon:", "@at", "`bt", "!bang", "&amp",
                        "*star", "|pipe", ">gt", "%pct", "?q", "---", "...", "\x01\x7f",
                        "中文 text", "emoji 😀", "nel\xC2\x85x", "ls\xE2\x80\xA8x",
                        "bom\xEF\xBB\xBFx", "plain_text", "with space"}) {
    t["strings"].push_back(s);
  }
  t["weird key: #1"] = "v";
  t["42"] = "numeric key";
  t[""] = "empty key";
  t["nested"] = json::parse(R"({"list": [[1, [2, {"deep": [{}, []]}]], {"x": null}]})");
  const std::string y = to_yaml(t);
  const json back = yaml_to_json(y);
  EXPECT_EQ(back, t) << y;
  EXPECT_TRUE(back["float_integral"].is_number_float()) << y;
  EXPECT_TRUE(std::signbit(back["neg_zero"].get<double>()));
  EXPECT_HAS(y, "plain_text\n");       // plain where safe
  EXPECT_HAS(to_yaml(json{{"n", 1}}), "n: 1");
  EXPECT_HAS(y, "- \"true\"\n");       // quoted where needed
  EXPECT_HAS(y, "- 中文 text\n");      // UTF-8 kept readable

  // Non-finite floats survive in memory.
  json nf = {{"a", std::numeric_limits<double>::infinity()},
             {"b", -std::numeric_limits<double>::infinity()},
             {"c", std::numeric_limits<double>::quiet_NaN()}};
  const std::string ny = to_yaml(nf);
  EXPECT_EQ(ny, "a: .inf\nb: -.inf\nc: .nan\n");
  json nb = yaml_to_json(ny);
  EXPECT_TRUE(std::isinf(nb["a"].get<double>()));
  EXPECT_TRUE(std::isnan(nb["c"].get<double>()));

  // Scalars and empty containers at the top level.
  for (const json& v : {json(5), json("x y"), json("true"), json(nullptr), json::array(),
                        json::object(), json(2.5)}) {
    EXPECT_EQ(yaml_to_json(to_yaml(v)), v) << to_yaml(v);
  }
}

// ---------------------------------------------------------------- overrides

json base_tree() {
  return yaml_to_json(R"(
actor:
  optim:
    lr: 1.0e-6
    weight_decay: 0.01
  clip_ratio: 0.2
rollout:
  n: 4
  stop: ["</s>"]
  tools:
    - name: search
      timeout_s: 5
experiment: demo
)");
}

TEST(Override, SetsExistingKeysWithYamlTypedValues) {
  json t = base_tree();
  apply_override(t, "actor.optim.lr=3e-6");
  EXPECT_TRUE(t["actor"]["optim"]["lr"].is_number_float());
  EXPECT_EQ(t["actor"]["optim"]["lr"].get<double>(), 3e-6);
  apply_override(t, "rollout.n=8");
  EXPECT_EQ(t["rollout"]["n"], json(8));
  apply_override(t, "experiment=run 2");  // value text may contain spaces
  EXPECT_EQ(t["experiment"], json("run 2"));
  apply_override(t, "experiment='007'");
  EXPECT_EQ(t["experiment"], json("007"));
  apply_override(t, "experiment=");  // Hydra: empty value is the empty string
  EXPECT_EQ(t["experiment"], json(""));
  apply_override(t, "experiment=null");
  EXPECT_TRUE(t["experiment"].is_null());
  apply_override(t, "actor.clip_ratio=true");
  EXPECT_EQ(t["actor"]["clip_ratio"], json(true));
  apply_override(t, "experiment=a=b");  // split at the first '='
  EXPECT_EQ(t["experiment"], json("a=b"));
  apply_override(t, "experiment=#1");  // not a comment
  EXPECT_EQ(t["experiment"], json("#1"));
}

TEST(Override, ListAndMapValues) {
  json t = base_tree();
  apply_override(t, "rollout.stop=[a, 'b c', 3, 1.5]");
  EXPECT_EQ(t["rollout"]["stop"], json::parse(R"(["a", "b c", 3, 1.5])"));
  apply_override(t, "rollout.stop=[]");
  EXPECT_EQ(t["rollout"]["stop"], json::array());
  // A map value merges into an existing map (Hydra), keeping other keys.
  apply_override(t, "actor.optim={lr: 0.5}");
  EXPECT_EQ(t["actor"]["optim"], json::parse(R"({"lr": 0.5, "weight_decay": 0.01})"));
  // A numeric segment indexes a list.
  apply_override(t, "rollout.tools.0.timeout_s=30");
  EXPECT_EQ(t["rollout"]["tools"][0]["timeout_s"], json(30));
  std::string m = error_of([&] { apply_override(t, "rollout.tools.3.name=x"); });
  EXPECT_HAS(m, "index 3 is out of range for 'rollout.tools' (a list of 1 items)");
  m = error_of([&] { apply_override(t, "rollout.stop=[a, b"); });
  EXPECT_HAS(m, "not a valid YAML list");
  m = error_of([&] { apply_override(t, "rollout.n={a: 1"); });
  EXPECT_HAS(m, "not a valid YAML map");
}

TEST(Override, PlusAddsNewKeysOnly) {
  json t = base_tree();
  apply_override(t, "+trainer.logger=[console, jsonl]");
  EXPECT_EQ(t["trainer"]["logger"], json::parse(R"(["console", "jsonl"])"));
  apply_override(t, "+actor.optim.eps=1e-8");
  EXPECT_EQ(t["actor"]["optim"]["eps"].get<double>(), 1e-8);
  std::string m = error_of([&] { apply_override(t, "+rollout.n=2"); });
  EXPECT_HAS(m, "'rollout.n' already exists (4)");
  EXPECT_HAS(m, "drop the '+'");
  // ++ sets or adds.
  apply_override(t, "++rollout.n=2");
  EXPECT_EQ(t["rollout"]["n"], json(2));
  apply_override(t, "++rollout.top_k=50");
  EXPECT_EQ(t["rollout"]["top_k"], json(50));
  // ~ deletes.
  apply_override(t, "~rollout.top_k");
  EXPECT_FALSE(t["rollout"].contains("top_k"));
  m = error_of([&] { apply_override(t, "~rollout.top_k"); });
  EXPECT_HAS(m, "unknown config key 'rollout.top_k'");
  // Overrides on an empty tree; a failed one leaves it null.
  json e;
  EXPECT_THROW(apply_override(e, "a.b=1"), Error);
  EXPECT_TRUE(e.is_null());
  apply_override(e, "+a.b=1");
  EXPECT_EQ(e, json::parse(R"({"a": {"b": 1}})"));
}

TEST(Override, MissingKeyNamesNearestKey) {
  json t = base_tree();
  // Typo inside a section: nearest sibling, rest of the path kept.
  std::string m = error_of([&] { apply_override(t, "actor.optm.lr=1e-5"); });
  EXPECT_HAS(m, "unknown config key 'actor.optm.lr'");
  EXPECT_HAS(m, "'actor' has no key 'optm'");
  EXPECT_HAS(m, "did you mean 'actor.optim.lr'?");
  EXPECT_HAS(m, "+actor.optm.lr=");
  m = error_of([&] { apply_override(t, "rollout.nn=8"); });
  EXPECT_HAS(m, "did you mean 'rollout.n'?");
  EXPECT_HAS(m, "Valid keys under 'rollout': n, stop, tools");
  // Right key, wrong section: found at another depth.
  m = error_of([&] { apply_override(t, "optim.lr=1e-5"); });
  EXPECT_HAS(m, "did you mean 'actor.optim.lr'?");
  m = error_of([&] { apply_override(t, "clip_ratio=0.1"); });
  EXPECT_HAS(m, "did you mean 'actor.clip_ratio'?");
  // Transposition counts as one edit.
  m = error_of([&] { apply_override(t, "actor.clip_raito=0.1"); });
  EXPECT_HAS(m, "did you mean 'actor.clip_ratio'?");
  // A far-off key gets no made-up suggestion, only the list of valid keys.
  m = error_of([&] { apply_override(t, "critic.ppo_epochs=2"); });
  EXPECT_LACKS(m, "did you mean");
  EXPECT_HAS(m, "Valid keys at the top level: actor, rollout, experiment.");
  // The user's trailing path is kept only where it makes a valid key.
  m = error_of([&] { apply_override(t, "actor.optm.betas=[1, 2]"); });
  EXPECT_HAS(m, "did you mean 'actor.optim'?");
  // The tree is unchanged after a failed override.
  EXPECT_EQ(t, base_tree());
}

TEST(Override, MalformedAssignments) {
  json t = base_tree();
  EXPECT_HAS(error_of([&] { apply_override(t, "rollout.n"); }), "has no '='");
  EXPECT_HAS(error_of([&] { apply_override(t, "=3"); }), "empty key");
  EXPECT_HAS(error_of([&] { apply_override(t, "rollout..n=3"); }), "empty part");
  EXPECT_HAS(error_of([&] { apply_override(t, "rollout.n.x=3"); }),
             "'rollout.n' is 4, not a map");
  EXPECT_HAS(error_of([&] { apply_override(t, "~rollout.n=3"); }), "takes no value");
  EXPECT_HAS(error_of([&] { apply_override(t, "experiment='abc"); }), "quoted string");
}

TEST(Override, ParseValue) {
  EXPECT_EQ(parse_override_value("3"), json(3));
  EXPECT_TRUE(parse_override_value("3.0").is_number_float());
  EXPECT_TRUE(parse_override_value("1e-3").is_number_float());
  EXPECT_EQ(parse_override_value("  abc  "), json("abc"));
  EXPECT_EQ(parse_override_value("yes"), json("yes"));
  EXPECT_EQ(parse_override_value("False"), json(false));
  EXPECT_EQ(parse_override_value("\"3\""), json("3"));
  EXPECT_EQ(parse_override_value("a: b"), json("a: b"));  // no block maps from the CLI
  EXPECT_EQ(parse_override_value("{a: [1, {b: c}]}"), json::parse(R"({"a": [1, {"b": "c"}]})"));
}

// ---------------------------------------------------------------- helpers

TEST(ConfigHelpers, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("optm", "optim"), 1u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);  // adjacent swap
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);  // OSA (true Damerau would say 2)
}

TEST(ConfigHelpers, KeyPathsAndMerge) {
  json t = json::parse(R"({"a": {"b": 1, "c": {"d": 2}}, "e": [{"f": 1}]})");
  EXPECT_EQ(json_key_paths(t), (std::vector<std::string>{"a", "a.b", "a.c", "a.c.d", "e"}));
  json base = json::parse(R"({"a": {"b": 1, "c": 2}, "l": [1, 2]})");
  merge_json(base, json::parse(R"({"a": {"c": 3, "d": 4}, "l": [9]})"));
  EXPECT_EQ(base, json::parse(R"({"a": {"b": 1, "c": 3, "d": 4}, "l": [9]})"));
}

// A registry spec (a map with "type") of another type replaces the old spec whole: the
// alfworld recipe's sliding window must not leave keep_last in a token_budget spec.
TEST(ConfigHelpers, SpecOfAnotherTypeReplacesWhole) {
  json t = json::parse(R"({"rollout": {"env_kwargs": {"context": {"type": "sliding_window", "keep_last": 4}}}})");
  apply_override(t, "rollout.env_kwargs.context={type: token_budget, max_prompt_tokens: 420}");
  EXPECT_EQ(t["rollout"]["env_kwargs"]["context"], json::parse(R"({"type": "token_budget", "max_prompt_tokens": 420})"));
  // The same type (or no type in the overlay) still merges key by key.
  apply_override(t, "rollout.env_kwargs.context={type: token_budget, reserve: 8}");
  EXPECT_EQ(t["rollout"]["env_kwargs"]["context"],
            json::parse(R"({"type": "token_budget", "max_prompt_tokens": 420, "reserve": 8})"));
  merge_json(t, json::parse(R"({"rollout": {"env_kwargs": {"context": {"max_prompt_tokens": 300}}}})"));
  EXPECT_EQ(t["rollout"]["env_kwargs"]["context"]["max_prompt_tokens"], json(300));
  EXPECT_EQ(t["rollout"]["env_kwargs"]["context"]["reserve"], json(8));
  // Nested specs follow the same rule inside lists' maps and deeper maps.
  json b = json::parse(R"({"r": {"type": "a", "x": 1, "inner": {"type": "p", "y": 2}}})");
  merge_json(b, json::parse(R"({"r": {"inner": {"type": "q", "z": 3}}})"));
  EXPECT_EQ(b, json::parse(R"({"r": {"type": "a", "x": 1, "inner": {"type": "q", "z": 3}}})"));
}

// ---------------------------------------------------------------- binding

TEST(Bind, DefaultsWhenTreeIsEmpty) {
  RootOptions r = bind_config<RootOptions>(json::object());
  EXPECT_EQ(r.actor.optim.lr, 1e-6);
  EXPECT_EQ(r.actor.clip_ratio, 0.2);
  EXPECT_EQ(r.rollout.n, 1);
  EXPECT_EQ(r.rollout.mode, "sync");
  EXPECT_EQ(r.rollout.reward_weights.at("format"), 0.1);
  EXPECT_EQ(r.experiment, "exp");
  // Null sections ("actor:" with nothing below) keep defaults too.
  r = bind_config<RootOptions>(yaml_to_json("actor:\nrollout:\n"));
  EXPECT_EQ(r.actor.optim.weight_decay, 0.01);
}

TEST(Bind, FillsEveryFieldType) {
  json t = yaml_to_json(R"(
actor:
  optim: {lr: 3.0e-6, betas: [0.8, 0.95]}
  ppo_epochs: 1e1          # integral float accepted for an int
  entropy_coeff: 0         # int accepted for a float
rollout:
  n: 8
  temperature: 1           # int accepted for a double
  mode: async
  do_sample: false
  max_tokens: 4294967296
  seed_offset: 18446744073709551615
  stop: ["</s>", "<|im_end|>"]
  tools:
    - {name: calc}
    - {name: web, timeout_s: 60}
  reward_weights: {format: 0.5, answer: 1}
  engine_kwargs: {block_size: 16, prefix_cache: true}
experiment: x
)");
  RootOptions r = bind_config<RootOptions>(t);
  EXPECT_EQ(r.actor.optim.lr, 3e-6);
  EXPECT_EQ(r.actor.optim.weight_decay, 0.01);  // not in tree: default
  EXPECT_EQ(r.actor.optim.betas, (std::vector<double>{0.8, 0.95}));
  EXPECT_EQ(r.actor.ppo_epochs, 10);
  EXPECT_EQ(r.actor.entropy_coeff, 0.0f);
  EXPECT_EQ(r.rollout.n, 8);
  EXPECT_EQ(r.rollout.temperature, 1.0);
  EXPECT_EQ(r.rollout.mode, "async");
  EXPECT_FALSE(r.rollout.do_sample);
  EXPECT_EQ(r.rollout.max_tokens, 4294967296LL);
  EXPECT_EQ(r.rollout.seed_offset, 18446744073709551615ULL);
  EXPECT_EQ(r.rollout.stop, (std::vector<std::string>{"</s>", "<|im_end|>"}));
  ASSERT_EQ(r.rollout.tools.size(), 2u);
  EXPECT_EQ(r.rollout.tools[0].name, "calc");
  EXPECT_EQ(r.rollout.tools[0].timeout_s, 10);  // element default
  EXPECT_EQ(r.rollout.tools[1].timeout_s, 60);
  EXPECT_EQ(r.rollout.reward_weights, (std::map<std::string, double>{{"answer", 1.0},
                                                                     {"format", 0.5}}));
  EXPECT_EQ(r.rollout.engine_kwargs, json::parse(R"({"block_size": 16, "prefix_cache": true})"));
  EXPECT_EQ(r.experiment, "x");
}

TEST(Bind, PrefixSelectsSectionAndNamesFullKeys) {
  json t = base_tree();
  ActorOptions a = bind_config<ActorOptions>(t, "actor");
  EXPECT_EQ(a.optim.lr, 1e-6);
  OptimOptions o = bind_config<OptimOptions>(t, "actor.optim");
  EXPECT_EQ(o.weight_decay, 0.01);
  // A missing section keeps defaults.
  OptimOptions d = bind_config<OptimOptions>(t, "critic.optim");
  EXPECT_EQ(d.lr, 1e-6);
  t["actor"]["optim"]["lr"] = "fast";
  std::string m = error_of([&] { bind_config<ActorOptions>(t, "actor"); });
  EXPECT_HAS(m, "actor.optim.lr: expected a number, got \"fast\"");
  // bind_into keeps values already in the object for keys the tree lacks.
  OptimOptions keep;
  keep.weight_decay = 0.5;
  bind_into(keep, yaml_to_json("lr: 2.0e-6"));
  EXPECT_EQ(keep.lr, 2e-6);
  EXPECT_EQ(keep.weight_decay, 0.5);
}

TEST(Bind, TypeErrorsNameKeyExpectedAndFound) {
  auto bind_err = [](const std::string& yaml) {
    return error_of([&] { bind_config<RootOptions>(yaml_to_json(yaml)); });
  };
  EXPECT_HAS(bind_err("actor: {optim: {lr: fast}}"),
             "actor.optim.lr: expected a number, got \"fast\"");
  EXPECT_HAS(bind_err("actor: {optim: {lr: '1e-5'}}"), "remove the quotes to pass a number");
  EXPECT_HAS(bind_err("rollout: {n: 2.5}"),
             "rollout.n: expected an integer in [-2147483648, 2147483647], got 2.5");
  EXPECT_HAS(bind_err("rollout: {n: 3000000000}"), "rollout.n: expected an integer");
  EXPECT_HAS(bind_err("rollout: {n: 2.5}"), "(not a whole number)");
  // 309 digits: read as a float that overflows to inf, reported as out of range.
  EXPECT_HAS(bind_err("rollout: {n: 1" + std::string(308, '0') + "}"),
             "(a number beyond the 64-bit integer range)");
  EXPECT_HAS(bind_err("rollout: {max_tokens: 99999999999999999999}"),
             "(a number beyond the 64-bit integer range)");
  EXPECT_HAS(bind_err("rollout: {n: true}"), "rollout.n: expected an integer");
  EXPECT_HAS(bind_err("rollout: {seed_offset: -1}"),
             "rollout.seed_offset: expected an integer in [0, 18446744073709551615], got -1");
  EXPECT_HAS(bind_err("rollout: {do_sample: yes}"),
             "rollout.do_sample: expected a bool (true or false), got \"yes\"");
  EXPECT_HAS(bind_err("rollout: {do_sample: 1}"), "(write true or false)");
  EXPECT_HAS(bind_err("experiment: 2024"), "experiment: expected a string, got 2024");
  EXPECT_HAS(bind_err("experiment: 2024"), "quote it");
  EXPECT_HAS(bind_err("rollout: {stop: </s>}"),
             "rollout.stop: expected a list of string, got \"</s>\"");
  EXPECT_HAS(bind_err("rollout: {stop: [a, 3]}"), "rollout.stop[1]: expected a string, got 3");
  EXPECT_HAS(bind_err("rollout: {tools: [{name: 5}]}"),
             "rollout.tools[0].name: expected a string, got 5");
  EXPECT_HAS(bind_err("rollout: {reward_weights: {format: high}}"),
             "rollout.reward_weights.format: expected a number, got \"high\"");
  EXPECT_HAS(bind_err("actor: 3"), "actor: expected a map, got 3");
  EXPECT_HAS(bind_err("actor: {optim: [1]}"), "actor.optim: expected a map, got a list [1]");
}

TEST(Bind, UnknownKeysNameNearestKey) {
  auto bind_err = [](const std::string& yaml) {
    return error_of([&] { bind_config<RootOptions>(yaml_to_json(yaml)); });
  };
  std::string m = bind_err("actor: {optm: {lr: 1.0e-5}}");
  EXPECT_HAS(m, "unknown config key 'actor.optm.lr'");
  EXPECT_HAS(m, "did you mean 'actor.optim.lr'?");
  m = bind_err("rollout: {nn: 8}");
  EXPECT_HAS(m, "unknown config key 'rollout.nn'");
  EXPECT_HAS(m, "did you mean 'rollout.n'?");
  // Right key in the wrong section (the top level): found at any depth.
  m = bind_err("optim: {lr: 1.0e-5}");
  EXPECT_HAS(m, "did you mean 'actor.optim.lr'?");
  m = bind_err("temperature: 0.7");
  EXPECT_HAS(m, "did you mean 'rollout.temperature'?");
  // Typo inside a list element.
  m = bind_err("rollout: {tools: [{name: a, timeot_s: 3}]}");
  EXPECT_HAS(m, "unknown config key 'rollout.tools[0].timeot_s'");
  EXPECT_HAS(m, "did you mean 'rollout.tools[0].timeout_s'?");
  // Dotted key written literally in YAML.
  m = bind_err("actor.clip_ratio: 0.1");
  EXPECT_HAS(m, "not split at dots");
  // Several problems are reported together.
  m = bind_err("actor: {optim: {lr: fast}, clip_rati: 1}\nrollout: {nn: 2}");
  EXPECT_HAS(m, "3 problems");
  EXPECT_HAS(m, "actor.optim.lr: expected a number");
  EXPECT_HAS(m, "did you mean 'actor.clip_ratio'?");
  EXPECT_HAS(m, "did you mean 'rollout.n'?");
}

TEST(Bind, ValidateRunsPerSectionWithPrefix) {
  std::string m = error_of([] {
    bind_config<RootOptions>(yaml_to_json("rollout: {mode: asinc}"));
  });
  EXPECT_HAS(m, "rollout: mode must be sync or async, got 'asinc'");
  m = error_of([] { bind_config<RootOptions>(yaml_to_json("actor: {optim: {lr: 0}}")); });
  EXPECT_HAS(m, "actor.optim: lr must be > 0, got 0");
  // validate() is skipped for a section that already has a type error.
  m = error_of([] { bind_config<RootOptions>(yaml_to_json("rollout: {mode: 3}")); });
  EXPECT_HAS(m, "rollout.mode: expected a string, got 3");
  EXPECT_LACKS(m, "must be sync or async");
}

TEST(Bind, DumpHasAllDefaultsAndRoundTrips) {
  RootOptions r;
  json d = config_to_json(r);
  EXPECT_EQ(d["actor"]["optim"], json::parse(R"({"lr": 1e-6, "weight_decay": 0.01,
                                                   "betas": [0.9, 0.999]})"));
  EXPECT_EQ(d["actor"]["entropy_coeff"].get<double>(), 0.001);  // float written as 0.001
  EXPECT_EQ(d["rollout"]["tools"], json::array());
  EXPECT_EQ(d["rollout"]["engine_kwargs"], json::object());
  std::vector<std::string> keys;
  for (auto it = d.begin(); it != d.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"actor", "rollout", "experiment"}));

  // Non-default values survive dump -> YAML -> load -> bind.
  r.actor.optim.lr = 2.5e-7;
  r.actor.entropy_coeff = 0.1f;
  r.rollout.stop = {"true", "", "a: b"};
  r.rollout.tools = {ToolOptions{"calc", 3}};
  r.rollout.seed_offset = 18446744073709551615ULL;
  r.rollout.engine_kwargs = json::parse(R"({"x": [1, "2"]})");
  r.experiment = "1e-3";
  const json back = yaml_to_json(to_yaml(config_to_json(r)));
  RootOptions r2 = bind_config<RootOptions>(back);
  EXPECT_EQ(r2.actor.optim.lr, 2.5e-7);
  EXPECT_EQ(r2.actor.entropy_coeff, 0.1f);
  EXPECT_EQ(r2.rollout.stop, r.rollout.stop);
  ASSERT_EQ(r2.rollout.tools.size(), 1u);
  EXPECT_EQ(r2.rollout.tools[0].name, "calc");
  EXPECT_EQ(r2.rollout.tools[0].timeout_s, 3);
  EXPECT_EQ(r2.rollout.seed_offset, r.rollout.seed_offset);
  EXPECT_EQ(r2.rollout.engine_kwargs, r.rollout.engine_kwargs);
  EXPECT_EQ(r2.experiment, "1e-3");
  EXPECT_EQ(config_to_json(r2), config_to_json(r));
}

TEST(Bind, DescribeListsKeysTypesDefaultsDocs) {
  const std::string d = describe_config(RootOptions{});
  EXPECT_HAS(d, "actor.optim.lr");
  EXPECT_HAS(d, "learning rate");
  EXPECT_HAS(d, "1e-06");
  EXPECT_HAS(d, "rollout.tools[].timeout_s");
  EXPECT_HAS(d, "list[section]");
  EXPECT_HAS(d, "map[string, double]");
  // A map of sections lists its value's fields under <name>, with their defaults.
  EXPECT_HAS(d, "rollout.named_tools ");
  EXPECT_HAS(d, "rollout.named_tools.<name>.timeout_s");
  EXPECT_HAS(d, "per-call timeout");
  EXPECT_LT(d.find("rollout.named_tools "), d.find("rollout.named_tools.<name>.name"));
  EXPECT_HAS(d, "\"sync\"");
  // Each field on its own line, in visit() order.
  const auto lr = d.find("actor.optim.lr");
  const auto wd = d.find("actor.optim.weight_decay");
  const auto n = d.find("rollout.n ");
  EXPECT_LT(lr, wd);
  EXPECT_LT(wd, n);
  // One line: key, type, default, doc.
  const auto line_start = d.rfind('\n', lr) + 1;
  const std::string line = d.substr(line_start, d.find('\n', lr) - line_start);
  EXPECT_HAS(line, "double");
  EXPECT_HAS(line, "1e-06");
  EXPECT_HAS(line, "learning rate");
}

struct Twice {
  int a = 0;
  template <class V>
  void visit(V& v) {
    v.field("a", a, "");
    v.field("a", a, "");
  }
};

TEST(Bind, DuplicateFieldDeclarationIsAnError) {
  EXPECT_HAS(error_of([] { describe_config(Twice{}); }), "declares 'a' twice");
  EXPECT_HAS(error_of([] { bind_config<Twice>(json::object()); }), "twice");
}

}  // namespace
}  // namespace agentr1
