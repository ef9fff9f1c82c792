// The YAML config reader and the key=value overrides, then typed binding: the input is
// YAML text, optionally followed by a line "%%" and one override per line.
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "fuzz_util.h"

namespace {

using agentr1::json;

struct Optim {
  double lr = 1e-6;
  std::vector<double> betas{0.9, 0.999};
  template <class V>
  void visit(V& v) {
    v.field("lr", lr, "learning rate");
    v.field("betas", betas, "AdamW betas");
  }
  void validate() const { AGENTR1_CHECK(lr > 0, "lr must be > 0, got " << lr); }
};

struct Tool {
  std::string name = "search";
  int timeout_s = 10;
  template <class V>
  void visit(V& v) {
    v.field("name", name, "tool name");
    v.field("timeout_s", timeout_s, "per-call timeout");
  }
};

struct Root {
  Optim optim;
  int n = 1;
  float temperature = 1.0f;
  bool do_sample = true;
  std::int64_t max_tokens = 1024;
  std::uint64_t seed = 0;
  std::string mode = "sync";
  std::vector<std::string> stop;
  std::vector<Tool> tools;
  std::map<std::string, double> weights{{"format", 0.1}};
  json kwargs = json::object();
  template <class V>
  void visit(V& v) {
    v.section("optim", optim, "optimiser");
    v.field("n", n, "samples per prompt");
    v.field("temperature", temperature, "sampling temperature");
    v.field("do_sample", do_sample, "sample vs greedy");
    v.field("max_tokens", max_tokens, "response budget");
    v.field("seed", seed, "seed");
    v.field("mode", mode, "sync | async");
    v.field("stop", stop, "stop strings");
    v.field("tools", tools, "tools");
    v.field("weights", weights, "reward weights");
    v.field("kwargs", kwargs, "free-form");
  }
};

bool has_non_finite(const json& j) {
  if (j.is_number_float()) return !std::isfinite(j.get<double>());
  if (j.is_structured())
    for (const auto& c : j)
      if (has_non_finite(c)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string yaml = input;
  std::vector<std::string> overrides;
  const size_t cut = input.find("\n%%\n");
  if (cut != std::string::npos) {
    yaml = input.substr(0, cut);
    std::istringstream rest(input.substr(cut + 4));
    for (std::string line; std::getline(rest, line);) overrides.push_back(line);
  }
  json tree;
  if (!fuzz::guarded([&] { tree = agentr1::yaml_to_json(yaml); })) return 0;
  if (tree.is_null()) tree = json::object();
  for (const auto& o : overrides) {
    const json before = tree;
    // (compared as text: NaN != NaN, and a tree may hold one)
    if (!fuzz::guarded([&] { agentr1::apply_override(tree, o); })) FUZZ_REQUIRE(tree.dump() == before.dump());
  }
  // The documented round trip: yaml_to_json(to_yaml(t)) == t for finite trees.
  std::string text;
  FUZZ_REQUIRE(fuzz::guarded([&] { text = agentr1::to_yaml(tree); }));
  if (!has_non_finite(tree)) {
    json back;
    FUZZ_REQUIRE(fuzz::guarded([&] { back = agentr1::yaml_to_json(text); }));
    if (back.is_null()) back = json::object();
    FUZZ_REQUIRE(back == tree);
  }
  fuzz::guarded([&] { (void)agentr1::bind_config<Root>(tree); });
  return 0;
}
