// agentr1/tasks/task_family.h — task families as plug-ins: what a run trains on.
//
//   tasks::register_builtin_tasks();                       // registers "arithmetic", ...
//   auto fam = tasks::make_task_family("arithmetic", {{"max_level", 2}});
//   std::vector<Sample> train = fam->make_dataset(DataSplit::kTrain, /*n=*/4096, /*seed=*/1);
//   std::vector<Sample> val = fam->make_dataset(DataSplit::kTest, /*n=*/64, /*seed=*/1000004);
//   std::vector<std::string> corpus;                       // for tokenizer training
//   std::vector<json> demos = fam->demonstrations(/*n=*/500, /*seed=*/7, tmpl, "<|im_end|>", &corpus);
//   for (const std::string& kv : fam->recipe_defaults()) { ... }   // "rollout.n=16", under the user's config
//
//   make_task_family("sudoku");            // Error "unknown task family 'sudoku'; known: arithmetic"
//   make_task_family("arithmetic", {{"max_levl", 2}});
//                                          // Error "task family 'arithmetic': unknown ... known: ..."
//
// A family owns everything task-specific a trainer needs: procedural datasets, the
// expert demonstrations for an SFT warm start and its recipe defaults. The tools and
// reward functions its samples name (env_kwargs.tools, data_source) are registered by
// register_builtin_tasks() (or by whoever registers the family). Families never touch
// torch; a family is immutable after construction and its methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/tasks/data_split.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {

class PlayEpisode;  // tasks/play.h

// One family of tasks: procedural dataset generation, the tools/rewards its samples use
// (registered by register_builtin_tasks), expert demonstrations for SFT, recipe defaults.
class TaskFamily {
 public:
  virtual ~TaskFamily() = default;

  // The registry name ("arithmetic").
  virtual std::string name() const = 0;

  // n generated samples of `split`; kTrain and kTest never share a problem (by
  // construction), kAny ignores the partition. Deterministic in (seed, the family's
  // options): the same call returns the same samples. Throws Error if n < 0.
  virtual std::vector<Sample> make_dataset(DataSplit split, int64_t n, uint64_t seed) const = 0;

  // n expert demonstrations (train split) in the SFT replay format
  //   {"sample": <Sample::to_json()>, "actions": ["<assistant text incl. end_of_turn>", ...]}
  // where actions are the assistant turns in order, as the policy should write them.
  // If rendered != nullptr, also appends each whole episode rendered with `tmpl` (n
  // texts, for tokenizer training), in the prompt format the samples ask for. Throws
  // Error if n < 0.
  virtual std::vector<json> demonstrations(int64_t n, uint64_t seed, const text::ChatTemplate& tmpl,
                                           const std::string& end_of_turn,
                                           std::vector<std::string>* rendered = nullptr) const = 0;

  // Train-config overrides ("key=value", dotted, as on the CLI) a run of this family
  // starts from (e.g. rollout budgets); the agentr1 app layers them right above the
  // defaults (apps/agentr1/train_setup.cpp), under the recipe file, --config and the
  // overrides, so the user can override each. Empty by default.
  virtual std::vector<std::string> recipe_defaults() const { return {}; }

  // One episode of `sample` (one of this family's samples) for agentr1 play, played by
  // hand or by the expert (tasks/play.h). Default: a game episode when the sample's
  // agent is a registered game (env::has_game), else a tool episode without an expert.
  virtual std::unique_ptr<PlayEpisode> play_episode(const Sample& sample) const;
};

// Builds a family from data.task_kwargs (a JSON object; {} or null = the defaults).
// Unknown keys or wrong types must throw Error listing the known keys.
using TaskFamilyFactory = std::function<std::unique_ptr<TaskFamily>(const json& kwargs)>;

// Throws Error when `name` is empty, the factory is empty, or `name` is already
// registered. Thread-safe.
void register_task_family(const std::string& name, TaskFamilyFactory factory);

// The family `name` built from `kwargs`. Throws Error listing the known names when
// `name` is unknown; Error "data.task_kwargs ..." when kwargs is neither null nor an
// object; the factory's errors rethrown as "task family '<name>': <error>".
std::unique_ptr<TaskFamily> make_task_family(const std::string& name, const json& kwargs = json::object());

// Registered names, sorted.
std::vector<std::string> task_family_names();
bool has_task_family(const std::string& name);

}  // namespace agentr1::tasks
