#include "agentr1/tasks/arithmetic/arithmetic_family.h"

#include "agentr1/core/error.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/arithmetic/demonstration.h"
#include "agentr1/tasks/play.h"

namespace agentr1::tasks {
namespace {

constexpr const char* kKnownKeys = "min_level, max_level, use_system_prompt, tools_in_prompt, restate_expression, demo_style";
constexpr int kMaxLevel = 4;  // ArithmeticOptions: at most 4 operations per problem

int read_level(const std::string& key, const json& v) {
  AGENTR1_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxLevel,
                "arithmetic task option '" << key << "' must be an integer in 1.." << kMaxLevel
                                           << " (operations per problem), got " << v.dump());
  return static_cast<int>(v.get<int64_t>());
}

bool read_bool(const std::string& key, const json& v) {
  AGENTR1_CHECK(v.is_boolean(), "arithmetic task option '" << key << "' must be true or false, got " << v.dump());
  return v.get<bool>();
}

}  // namespace

void ArithmeticFamilyOptions::validate() const {
  AGENTR1_CHECK(min_level >= 1 && min_level <= kMaxLevel,
                "arithmetic task option 'min_level' must be in 1.." << kMaxLevel
                                                                   << " (operations per problem), got " << min_level);
  AGENTR1_CHECK(max_level >= 1 && max_level <= kMaxLevel,
                "arithmetic task option 'max_level' must be in 1.." << kMaxLevel
                                                                   << " (operations per problem), got " << max_level);
  AGENTR1_CHECK(min_level <= max_level, "arithmetic task options: min_level must be <= max_level, got min_level "
                                            << min_level << " > max_level " << max_level
                                            << ". HINT: raise max_level or lower min_level");
}

ArithmeticFamilyOptions ArithmeticFamilyOptions::from_json(const json& kw) {
  ArithmeticFamilyOptions o;
  if (kw.is_null()) return o;
  AGENTR1_CHECK(kw.is_object(), "arithmetic task options must be a map (keys: " << kKnownKeys << "), got "
                                                                               << kw.type_name() << " " << kw.dump());
  for (auto it = kw.begin(); it != kw.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "min_level") {
      o.min_level = read_level(k, v);
    } else if (k == "max_level") {
      o.max_level = read_level(k, v);
    } else if (k == "use_system_prompt") {
      o.use_system_prompt = read_bool(k, v);
    } else if (k == "tools_in_prompt") {
      o.tools_in_prompt = read_bool(k, v);
    } else if (k == "restate_expression") {
      o.restate_expression = read_bool(k, v);
    } else if (k == "demo_style") {
      AGENTR1_CHECK(v.is_string(), "arithmetic task option 'demo_style' must be \"single\" or \"per_step\", got "
                                       << v.dump());
      o.demo_style = with_context("arithmetic task option 'demo_style'",
                                  [&] { return parse_demo_style(v.get<std::string>()); });
    } else {
      throw Error("unknown arithmetic task option '" + k + "'; known: " + kKnownKeys);
    }
  }
  o.validate();
  return o;
}

json ArithmeticFamilyOptions::to_json() const {
  return {{"min_level", min_level},
          {"max_level", max_level},
          {"use_system_prompt", use_system_prompt},
          {"tools_in_prompt", tools_in_prompt},
          {"restate_expression", restate_expression},
          {"demo_style", demo_style == DemoStyle::kPerStep ? "per_step" : "single"}};
}

ArithmeticFamily::ArithmeticFamily(ArithmeticFamilyOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

ArithDatasetOptions ArithmeticFamily::dataset_options(DataSplit split) const {
  ArithDatasetOptions o;
  o.problem.min_level = opts_.min_level;
  o.problem.max_level = opts_.max_level;
  o.problem.split = split;
  o.prompt.use_system_prompt = opts_.use_system_prompt;
  return o;
}

std::vector<Sample> ArithmeticFamily::make_dataset(DataSplit split, int64_t n, uint64_t seed) const {
  std::vector<Sample> out = make_arith_dataset(n, seed, dataset_options(split));
  if (!opts_.tools_in_prompt) {
    for (Sample& s : out) s.env_kwargs["tools_in_prompt"] = false;
  }
  return out;
}

std::vector<json> ArithmeticFamily::demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                                   const std::string& end_of_turn,
                                                   std::vector<std::string>* rendered) const {
  AGENTR1_CHECK(n >= 0, "arithmetic demonstrations: n must be >= 0, got " << n);
  const ArithDatasetOptions dso = dataset_options(DataSplit::kTrain);
  const json tools = json::array({Calculator().schema()});
  text::RenderOptions ro;
  ro.enable_thinking = false;
  DemoOptions demo_opts;
  demo_opts.restate_expression = opts_.restate_expression;
  demo_opts.style = opts_.demo_style;
  demo_opts.prompt = dso.prompt;
  std::vector<json> demos;
  demos.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const ArithProblem p = generate_problem(seed, i, dso.problem);
    const json demo = expert_demonstration(p, tools, demo_opts);
    const json& msgs = demo["messages"];
    if (rendered != nullptr) {
      rendered->push_back(tmpl.render(msgs, opts_.tools_in_prompt ? tools : json(),
                                      /*add_generation_prompt=*/false, ro));
    }
    Sample s = arith_problem_to_sample(p, dso);
    if (!opts_.tools_in_prompt) s.env_kwargs["tools_in_prompt"] = false;
    json actions = json::array();
    for (const auto& m : msgs) {
      if (m["role"] == "assistant") actions.push_back(assistant_action_text(m, end_of_turn));
    }
    json d;
    d["sample"] = s.to_json();
    d["actions"] = std::move(actions);
    demos.push_back(std::move(d));
  }
  return demos;
}

std::unique_ptr<PlayEpisode> ArithmeticFamily::play_episode(const Sample& sample) const {
  // The expert needs the problem: regenerate it from the sample's extra_info.
  const json& x = sample.extra_info;
  std::vector<std::string> expert;
  if (x.is_object() && x.contains("seed") && x.contains("index") && x.contains("split") &&
      x["seed"].is_number_unsigned() && x["index"].is_number_integer() && x["split"].is_string()) {
    const ArithDatasetOptions dso = dataset_options(parse_data_split(x["split"].get<std::string>()));
    const ArithProblem p = generate_problem(x["seed"].get<uint64_t>(), x["index"].get<int64_t>(), dso.problem);
    if (p.question == x.value("question", "")) {
      DemoOptions demo_opts;
      demo_opts.restate_expression = opts_.restate_expression;
      demo_opts.style = opts_.demo_style;
      demo_opts.prompt = dso.prompt;
      const json demo = expert_demonstration(p, json::array({Calculator().schema()}), demo_opts);
      for (const auto& m : demo["messages"]) {
        if (m["role"] != "assistant") continue;
        if (m.contains("tool_calls")) {
          for (const auto& tc : m["tool_calls"]) {
            json call = json::object();
            call["name"] = tc["function"]["name"];
            call["arguments"] = tc["function"]["arguments"];
            expert.push_back(call.dump());
          }
        } else {
          expert.push_back(m.value("content", ""));
        }
      }
    }
  }
  return make_tool_episode(sample, std::move(expert));
}

std::vector<std::string> ArithmeticFamily::recipe_defaults() const {
  if (opts_.demo_style != DemoStyle::kPerStep) return {};
  return {"rollout.max_steps=" + std::to_string(opts_.max_level + 1)};
}

}  // namespace agentr1::tasks
