#include "agentr1/tasks/arithmetic/arithmetic_family.h"

#include "agentr1/core/error.h"
#include "agentr1/env/python_tool.h"
#include "agentr1/tasks/calculator.h"
#include "agentr1/tasks/arithmetic/demonstration.h"
#include "agentr1/tasks/play.h"

namespace agentr1::tasks {
namespace {

constexpr int kMaxLevel = 4;  // ArithmeticOptions: at most 4 operations per problem

// The schema of the tool the expert calls, as the ToolEnv lists it.
json tool_schemas(ArithTool tool) {
  if (tool == ArithTool::kPython) {
    return json::array({env::PythonTool(env::PythonToolOptions::from_json(ArithmeticFamily::python_tool_kwargs())).schema()});
  }
  return json::array({Calculator().schema()});
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
  return bind_config<ArithmeticFamilyOptions>(json{{"data", {{"task_kwargs", kw}}}}, "data.task_kwargs");
}

json ArithmeticFamilyOptions::to_json() const { return config_to_json(*this); }

ArithmeticFamily::ArithmeticFamily(ArithmeticFamilyOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

ArithDatasetOptions ArithmeticFamily::dataset_options(DataSplit split) const {
  ArithDatasetOptions o;
  o.problem.min_level = opts_.min_level;
  o.problem.max_level = opts_.max_level;
  o.problem.split = split;
  o.prompt.use_system_prompt = opts_.use_system_prompt;
  if (opts_.tool == ArithTool::kPython) o.prompt.system_prompt = kPythonArithSystemPrompt;
  o.tool = opts_.tool;
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
  const json tools = tool_schemas(opts_.tool);
  text::RenderOptions ro;
  ro.enable_thinking = false;
  DemoOptions demo_opts = demo_options(dso);
  if (opts_.tool == ArithTool::kPython) {
    // One interpreter for the whole batch, with the recipe's limits (the expert's cells
    // only print): one sandbox start instead of one per call. The SFT replay through
    // the env still runs each call in the env's own tool.
    env::PythonToolOptions session = demo_opts.python;
    session.mode = "session";
    demo_opts.python_interpreter = std::make_shared<env::PythonTool>(session);
  }
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
      const json demo = expert_demonstration(p, tool_schemas(opts_.tool), demo_options(dso));
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

DemoOptions ArithmeticFamily::demo_options(const ArithDatasetOptions& dso) const {
  DemoOptions d;
  d.restate_expression = opts_.restate_expression;
  d.style = opts_.demo_style;
  d.tool = opts_.tool;
  d.prompt = dso.prompt;
  if (opts_.tool == ArithTool::kPython) d.python = env::PythonToolOptions::from_json(python_tool_kwargs());
  return d;
}

json ArithmeticFamily::python_tool_kwargs() { return {{"mode", "fresh"}, {"timeout_s", 2}, {"cpu_s", 2}}; }

std::vector<std::string> ArithmeticFamily::recipe_defaults() const {
  std::vector<std::string> out;
  if (opts_.demo_style == DemoStyle::kPerStep) out.push_back("rollout.max_steps=" + std::to_string(opts_.max_level + 1));
  if (opts_.tool == ArithTool::kPython) {
    out.push_back("++rollout.env_kwargs.tool_kwargs={python: " + python_tool_kwargs().dump() + "}");
    out.push_back("++rollout.env_kwargs.tool_timeout_s=3");
  }
  return out;
}

}  // namespace agentr1::tasks

namespace agentr1::config_detail {
namespace {

// A string option read through its parser: a non-string is a type error naming
// `expected`, a parser Error (which names the value and the choices) is kept with the key.
template <class T, class Parse>
void read_by_name(const json& v, T& out, const std::string& key, BindContext& ctx, const char* expected,
                  Parse parse) {
  if (!v.is_string()) {
    ctx.errors.push_back(type_error(key, expected, v));
    return;
  }
  try {
    out = parse(v.get<std::string>());
  } catch (const std::exception& e) {
    ctx.errors.push_back(key + ": " + e.what());
  }
}

}  // namespace

void Codec<tasks::DemoStyle>::read(const json& v, tasks::DemoStyle& out, const std::string& key, BindContext& ctx) {
  read_by_name(v, out, key, ctx, "\"single\" or \"per_step\"", tasks::parse_demo_style);
}

json Codec<tasks::DemoStyle>::write(const tasks::DemoStyle& x) {
  return x == tasks::DemoStyle::kPerStep ? "per_step" : "single";
}

void Codec<tasks::ArithTool>::read(const json& v, tasks::ArithTool& out, const std::string& key, BindContext& ctx) {
  read_by_name(v, out, key, ctx, "\"calculator\" or \"python\"", tasks::parse_arith_tool);
}

json Codec<tasks::ArithTool>::write(const tasks::ArithTool& x) { return tasks::arith_tool_name(x); }

}  // namespace agentr1::config_detail
