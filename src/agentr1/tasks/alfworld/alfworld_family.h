// agentr1/tasks/alfworld/alfworld_family.h — the "alfworld" task family: ALFWorld-style household
// rooms (alfworld_world.h, alfworld_generator.h) played as a text game through GameEnv
// (alfworld_game.h), with the state-reading expert (alfworld_expert.h) for SFT.
//
//   register_alfworld_family();        // game env "alfworld" + task family "alfworld" (idempotent)
//   auto fam = make_task_family("alfworld", {{"min_level", 1}, {"max_level", 3},
//                                            {"task_types", {"pick_and_place_simple", "look_at_obj_in_light"}}});
//   std::vector<Sample> train = fam->make_dataset(DataSplit::kTrain, 4096, /*seed=*/1);
//   std::vector<Sample> val = fam->make_dataset(DataSplit::kTest, 128, /*seed=*/1);   // unseen layouts
//   std::vector<json> demos = fam->demonstrations(500, 7, tmpl, "<|im_end|>", &corpus);
//
// task_kwargs keys (all optional; unknown keys, wrong types and bad values throw Error
// naming the key and the rule):
//   min_level (int 1..4, default 1), max_level (int 1..4, default 2, >= min_level): each
//       sample's level is drawn uniformly in [min_level, max_level]; levels scale the
//       receptacle count, distractors and closed receptacles (alfworld_generator.h)
//   task_types (list of ALFWorld task-type names, default all six; non-empty, no
//       repeats): each sample's type is drawn uniformly from the list
//   use_system_prompt (bool, default true): the prompt is one system message with the
//       rules (kAlfworldSystemPrompt, commands and the <action> format); false: one short
//       user message with the format rule only (a sample needs a non-empty prompt)
//   show_admissible (bool, default false): samples carry env_kwargs.show_admissible =
//       true, so GameEnv lists the admissible commands after each observation
//   step_limit (int >= 1, default 50, ALFWorld's evaluation budget): samples carry
//       env_kwargs.game = {"step_limit": n}; the game ends an unsolved episode there
//
// Samples: agent_name "alfworld", reward_model {style "env", ground_truth: the goal text
// ("put a clean mug in cabinet")}, data_source "alfworld", env_kwargs {"game":
// {"step_limit": n}} (+ "show_admissible": true), extra_info {"world": {"seed", "index",
// "level", "split", "task_type"}} (everything reset() needs; no layout is stored: the world
// is regenerated from it). The prompt holds only the rules; GameEnv appends the game's
// intro (room + "Your task is to: ...") as the next user message. No "context" in the
// samples: the family's default context goes into recipe_defaults.
// Splits: kTest worlds have layouts (room kind + receptacle counts) no kTrain world has
// (ALFWorld's valid_unseen); sample i of a split uses world (seed, i) of that split.
//
// Context: episodes run up to 50 turns and each observation adds ~20-80 tokens (more with
// show_admissible), so the default context policy is a sliding window over the last 4
// turns; the head (rules + intro with the goal and the room's receptacles) always stays.
//
// No real-format loader: ALFWorld's data are PDDL problems and TextWorld game files
// (needing the TextWorld engine), not plain rows; the generator replaces them.
//
// Deviations from ALFWorld (alfworld/alfworld: data/alfred.twl2, alfred.pddl,
// gen/goal_library.py, gen/constants.py):
//   - rooms are generated (alfworld_generator.h), not AI2-THOR scenes; "unseen" is a
//     receptacle layout whose hash puts it in the test split, not a held-out scene id
//   - the intro has no "-= Welcome to TextWorld, ALFRED! =-" banner (as the ReAct-style
//     prompts strip it): "You are in the middle of a room. ...\n\nYour task is to: ..."
//   - goals name types and accept any instance, as ALFWorld's templates do ("put a clean
//     mug in cabinet"); the issue's example "cabinet 3" names an instance, ALFWorld never
//     does
//   - six task types only (no movable-receptacle or slice tasks; the slice command and the
//     sliced state exist); one lamp type (desklamp); no floor objects; no "help"
//   - "go to" the receptacle the agent already faces is "Nothing happens." and is not
//     listed; admissible commands are sorted
//   - the expert reads the true state (like ALFWorld's planner expert), it does not explore
//     like ALFWorld's handcoded one; heat/cool/clean need no open appliance (as in the PDDL)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/alfworld/alfworld_generator.h"
#include "agentr1/tasks/alfworld/alfworld_world.h"
#include "agentr1/tasks/task_family.h"

namespace agentr1::tasks {

// The rules shown to the policy (system message), with "{step_limit}" filled in.
std::string alfworld_system_prompt(int step_limit);
// The one-line user instruction used when use_system_prompt is false.
extern const char* const kAlfworldShortInstruction;

struct AlfworldFamilyOptions {
  int min_level = 1;                    // lowest level drawn (1..4)
  int max_level = 2;                    // highest level drawn (min_level..4)
  std::vector<alfworld::TaskType> task_types = alfworld::all_task_types();  // drawn uniformly
  bool use_system_prompt = true;        // rules as a system message (else a short user line)
  bool show_admissible = false;         // samples ask GameEnv to list admissible commands
  int step_limit = 50;                  // the game's per-episode command budget

  // Names every key once (core/config.h: binding, to_json, describe_config).
  template <class V>
  void visit(V& v) {
    v.field("min_level", min_level, "lowest level drawn (1..4)");
    v.field("max_level", max_level, "highest level drawn (min_level..4)");
    v.field("task_types", task_types, "ALFWorld task types drawn uniformly (non-empty, no repeats)");
    v.field("use_system_prompt", use_system_prompt, "rules as a system message (false: a short user line)");
    v.field("show_admissible", show_admissible, "samples ask GameEnv to list the admissible commands");
    v.field("step_limit", step_limit, "commands per episode (1..100000)");
  }
  // Throws Error naming the key, the rule and the value.
  void validate() const;
  // From task_kwargs (null or {} = defaults), bound with bind_config at "data.task_kwargs":
  // throws one Error listing unknown keys (with the valid ones), wrong types and invalid
  // values, each with its dotted key.
  static AlfworldFamilyOptions from_json(const json& kwargs);
  json to_json() const;
};

class AlfworldFamily : public TaskFamily {
 public:
  // Validates opts (throws Error as AlfworldFamilyOptions::validate).
  explicit AlfworldFamily(AlfworldFamilyOptions opts = {});

  std::string name() const override { return "alfworld"; }
  const AlfworldFamilyOptions& options() const { return opts_; }

  // Sample i: level and task type drawn from (seed, i), world (seed, i, level, split,
  // type). Deterministic; kTrain and kTest never share a layout. Throws Error if n < 0.
  std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const override;
  // The expert on make_dataset(kTrain, n, seed) (game_expert_demonstration, a fresh game
  // per sample). Throws Error if n < 0 or (a bug) the expert fails a world.
  std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                   const std::string& end_of_turn,
                                   std::vector<std::string>* rendered = nullptr) const override;
  // {"rollout.max_steps=<step_limit>", "rollout.max_new_tokens=48",
  //  "rollout.max_response_tokens=<48 * step_limit>", "rollout.max_prompt_tokens=1984",
  //  "++rollout.env_kwargs.context={type: sliding_window, keep_last: 4}"} (++: env_kwargs
  //  has no "context" key by default)
  std::vector<std::string> recipe_defaults() const override;

  // The sample of one world (what make_dataset writes for it); generates the world for
  // its goal. Throws Error for an invalid spec.
  Sample make_sample(const alfworld::WorldSpec& spec) const;

 private:
  AlfworldFamilyOptions opts_;
};

// Registers the game env "alfworld" (env::register_game_env; the factory reads the game
// kwargs, AlfworldGameOptions) and the task family "alfworld". Idempotent, thread-safe.
void register_alfworld_family();

}  // namespace agentr1::tasks

// TaskType binds by name ("pick_and_place_simple", ...); core/config.h has no enum fields.
namespace agentr1::config_detail {
template <>
struct Codec<tasks::alfworld::TaskType> {
  static std::string type_name() { return "string"; }
  static void read(const json& v, tasks::alfworld::TaskType& out, const std::string& key, BindContext& ctx);
  static json write(const tasks::alfworld::TaskType& x);
};
}  // namespace agentr1::config_detail
