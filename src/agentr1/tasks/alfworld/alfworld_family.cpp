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

constexpr uint64_t kSeedAlfSample = 0x616c6673616dULL;  // "alfsam": per-sample level / task-type draws

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
  return bind_config<AlfworldFamilyOptions>(json{{"data", {{"task_kwargs", kw}}}}, "data.task_kwargs");
}

json AlfworldFamilyOptions::to_json() const { return config_to_json(*this); }

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

namespace agentr1::config_detail {

void Codec<tasks::alfworld::TaskType>::read(const json& v, tasks::alfworld::TaskType& out, const std::string& key,
                                            BindContext& ctx) {
  if (!v.is_string()) {
    ctx.errors.push_back(type_error(key, "an ALFWorld task-type name", v));
    return;
  }
  try {
    out = tasks::alfworld::parse_task_type(v.get<std::string>());
  } catch (const std::exception& e) {
    ctx.errors.push_back(key + ": " + e.what());
  }
}

json Codec<tasks::alfworld::TaskType>::write(const tasks::alfworld::TaskType& x) {
  return tasks::alfworld::task_type_name(x);
}

}  // namespace agentr1::config_detail
