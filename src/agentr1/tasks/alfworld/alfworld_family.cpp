#include "agentr1/tasks/alfworld/alfworld_family.h"

#include <algorithm>
#include <mutex>

#include "agentr1/core/error.h"
#include "agentr1/core/rng.h"
#include "agentr1/env/text_game.h"
#include "agentr1/tasks/alfworld/alfworld_game.h"
#include "agentr1/tasks/game_demo.h"

namespace agentr1::tasks {
namespace {

using alfworld::TaskType;

constexpr const char* kKnownKeys = "min_level, max_level, task_types, use_system_prompt, show_admissible, step_limit";
constexpr uint64_t kSeedAlfSample = 0x616c6673616dULL;  // "alfsam": per-sample level / task-type draws

int read_level(const std::string& key, const json& v) {
  AGENTR1_CHECK(v.is_number_integer() && v.get<int64_t>() >= alfworld::kMinLevel &&
                    v.get<int64_t>() <= alfworld::kMaxLevel,
                "alfworld task option '" << key << "' must be an integer in " << alfworld::kMinLevel << ".."
                                         << alfworld::kMaxLevel << ", got " << v.dump());
  return static_cast<int>(v.get<int64_t>());
}

bool read_bool(const std::string& key, const json& v) {
  AGENTR1_CHECK(v.is_boolean(), "alfworld task option '" << key << "' must be true or false, got " << v.dump());
  return v.get<bool>();
}

std::vector<TaskType> read_task_types(const json& v) {
  AGENTR1_CHECK(v.is_array(), "alfworld task option 'task_types' must be a list of task-type names, got " << v.dump());
  std::vector<TaskType> out;
  for (const json& e : v) {
    AGENTR1_CHECK(e.is_string(), "alfworld task option 'task_types' must hold strings, got " << e.dump());
    out.push_back(with_context("alfworld task option 'task_types'",
                               [&] { return alfworld::parse_task_type(e.get<std::string>()); }));
  }
  return out;
}

json message(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }

}  // namespace

const char* const kAlfworldShortInstruction =
    "Reply with exactly one command per turn, inside <action>...</action>, e.g. <action>go to cabinet 1</action>.";

std::string alfworld_system_prompt(int step_limit) {
  return "You are a household agent in a text world. Each turn you read what you observe and reply with exactly "
         "one command inside <action>...</action>, for example <action>go to cabinet 1</action>.\n"
         "Commands:\n"
         "  look | inventory\n"
         "  go to <receptacle>\n"
         "  open <receptacle> | close <receptacle>\n"
         "  take <object> from <receptacle>\n"
         "  move <object> to <receptacle>\n"
         "  examine <receptacle or object>\n"
         "  use <object> (switch on a desklamp)\n"
         "  clean <object> with <sinkbasin> | heat <object> with <microwave> | cool <object> with <fridge>\n"
         "  slice <object> with <knife>\n"
         "Use the numbered names you see (mug 1, countertop 2). You can carry one object at a time; open a "
         "closed receptacle before taking from it or putting into it. A command that cannot be done gives "
         "\"Nothing happens.\" You have " +
         std::to_string(step_limit) + " commands to complete the task.";
}

void AlfworldFamilyOptions::validate() const {
  AGENTR1_CHECK(min_level >= alfworld::kMinLevel && min_level <= alfworld::kMaxLevel,
                "alfworld task option 'min_level' must be in " << alfworld::kMinLevel << ".." << alfworld::kMaxLevel
                                                               << ", got " << min_level);
  AGENTR1_CHECK(max_level >= alfworld::kMinLevel && max_level <= alfworld::kMaxLevel,
                "alfworld task option 'max_level' must be in " << alfworld::kMinLevel << ".." << alfworld::kMaxLevel
                                                               << ", got " << max_level);
  AGENTR1_CHECK(min_level <= max_level, "alfworld task options: min_level must be <= max_level, got min_level "
                                            << min_level << " > max_level " << max_level
                                            << ". HINT: raise max_level or lower min_level");
  AGENTR1_CHECK(!task_types.empty(), "alfworld task option 'task_types' must list at least one task type");
  for (size_t i = 0; i < task_types.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      AGENTR1_CHECK(task_types[i] != task_types[j], "alfworld task option 'task_types' lists '"
                                                        << alfworld::task_type_name(task_types[i])
                                                        << "' twice; list each type once");
    }
  }
  AGENTR1_CHECK(step_limit >= 1 && step_limit <= 100000,
                "alfworld task option 'step_limit' must be an integer in 1..100000, got " << step_limit);
}

AlfworldFamilyOptions AlfworldFamilyOptions::from_json(const json& kw) {
  AlfworldFamilyOptions o;
  if (kw.is_null()) return o;
  AGENTR1_CHECK(kw.is_object(), "alfworld task options must be a map (keys: " << kKnownKeys << "), got "
                                                                             << kw.type_name() << " " << kw.dump());
  for (auto it = kw.begin(); it != kw.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "min_level") {
      o.min_level = read_level(k, v);
    } else if (k == "max_level") {
      o.max_level = read_level(k, v);
    } else if (k == "task_types") {
      o.task_types = read_task_types(v);
    } else if (k == "use_system_prompt") {
      o.use_system_prompt = read_bool(k, v);
    } else if (k == "show_admissible") {
      o.show_admissible = read_bool(k, v);
    } else if (k == "step_limit") {
      AGENTR1_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 100000,
                    "alfworld task option 'step_limit' must be an integer in 1..100000, got " << v.dump());
      o.step_limit = static_cast<int>(v.get<int64_t>());
    } else {
      throw Error("unknown alfworld task option '" + k + "'; known: " + kKnownKeys);
    }
  }
  o.validate();
  return o;
}

json AlfworldFamilyOptions::to_json() const {
  json types = json::array();
  for (TaskType t : task_types) types.push_back(alfworld::task_type_name(t));
  return {{"min_level", min_level},         {"max_level", max_level},
          {"task_types", types},            {"use_system_prompt", use_system_prompt},
          {"show_admissible", show_admissible}, {"step_limit", step_limit}};
}

AlfworldFamily::AlfworldFamily(AlfworldFamilyOptions opts) : opts_(std::move(opts)) { opts_.validate(); }

Sample AlfworldFamily::make_sample(const alfworld::WorldSpec& spec) const {
  const alfworld::World w = alfworld::generate_world(spec);
  Sample s;
  s.prompt = json::array({opts_.use_system_prompt ? message("system", alfworld_system_prompt(opts_.step_limit))
                                                  : message("user", kAlfworldShortInstruction)});
  s.agent_name = "alfworld";
  s.reward_style = "env";
  s.ground_truth = w.goal.text();
  s.data_source = "alfworld";
  s.env_kwargs = {{"game", alfworld::AlfworldGameOptions{opts_.step_limit}.to_json()}};
  if (opts_.show_admissible) s.env_kwargs["show_admissible"] = true;
  s.extra_info = {{"world", spec.to_json()}};
  return s;
}

std::vector<Sample> AlfworldFamily::make_dataset(DataSplit split, int64_t n, uint64_t seed) const {
  AGENTR1_CHECK(n >= 0, "alfworld make_dataset: n must be >= 0, got " << n);
  std::vector<Sample> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(derive_seed(seed, {kSeedAlfSample, static_cast<uint64_t>(i)}));
    alfworld::WorldSpec spec;
    spec.seed = seed;
    spec.index = i;
    spec.level = static_cast<int>(rng.uniform_int(opts_.min_level, opts_.max_level));
    spec.split = split;
    spec.task_type = opts_.task_types[rng.choice(opts_.task_types.size())];
    out.push_back(make_sample(spec));
  }
  return out;
}

std::vector<json> AlfworldFamily::demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                                 const std::string& end_of_turn,
                                                 std::vector<std::string>* rendered) const {
  AGENTR1_CHECK(n >= 0, "alfworld demonstrations: n must be >= 0, got " << n);
  std::vector<json> demos;
  demos.reserve(static_cast<size_t>(n));
  for (const Sample& s : make_dataset(DataSplit::kTrain, n, seed)) {
    alfworld::AlfworldGame game(alfworld::AlfworldGameOptions{opts_.step_limit});
    demos.push_back(game_expert_demonstration(game, s, tmpl, end_of_turn, rendered, opts_.step_limit));
  }
  return demos;
}

std::vector<std::string> AlfworldFamily::recipe_defaults() const {
  const int max_new = 48;  // "<action>take peppershaker 2 from countertop 3</action>" is ~20 tokens
  return {"rollout.max_steps=" + std::to_string(opts_.step_limit),
          "rollout.max_new_tokens=" + std::to_string(max_new),
          "rollout.max_response_tokens=" + std::to_string(max_new * opts_.step_limit),
          "rollout.max_prompt_tokens=1984",
          "++rollout.env_kwargs.context={type: sliding_window, keep_last: 4}"};
}

void register_alfworld_family() {
  static std::once_flag once;
  std::call_once(once, [] {
    env::register_game_env("alfworld", [](const json& game_kwargs) -> std::unique_ptr<env::TextGame> {
      return std::make_unique<alfworld::AlfworldGame>(alfworld::AlfworldGameOptions::from_json(game_kwargs));
    });
    register_task_family("alfworld", [](const json& kwargs) -> std::unique_ptr<TaskFamily> {
      return std::make_unique<AlfworldFamily>(AlfworldFamilyOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::tasks
