// agentr1 play — one episode of a task family, played by hand (stdin) or by its expert.
//
//   agentr1 play --task alfworld --seed 3                  # actions from stdin, one per line
//   agentr1 play --task webshop --expert                   # the expert plays, actions printed
//   echo 'go to fridge 1' | agentr1 play --task alfworld --split train max_level=2
//
// Output (stdin not a terminal, or --expert): one JSON object per line on stdout, first
//   {"observation": ..., "info": {...}}                     after reset
// then per action
//   {"action": ..., "observation": ..., "reward": r, "done": bool, "info": {...}}
// The final line's info has what a reviewer needs to check the reward (the family's
// summary: goal, target, what was bought or achieved, gold answer). Blank input lines are
// skipped; the episode ends when the game or the answer ends it, or at end of input.
// With a terminal on stdin it is a readable game instead: the observation, a "> " prompt,
// "reward ... done" after each action; "quit" leaves.
//
// The episode is sample `--index` (default 0) of make_dataset(split, index + 1, seed) of
// the family built from the key=value task kwargs (values parsed as on the train command
// line: numbers, true/false, [lists]). Errors (unknown task, bad kwargs) are one line on
// stderr and exit code 1.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/json.h"
#include "agentr1/tasks/builtin.h"
#include "agentr1/tasks/play.h"
#include "agentr1/tasks/task_family.h"
#include "command.h"

namespace {

using agentr1::Error;
using agentr1::json;

struct PlayOpts {
  std::string task;
  uint64_t seed = 0;
  int64_t index = 0;
  std::string split = "test";
  bool expert = false;
  std::vector<std::string> kwargs;   // key=value task kwargs
};

json task_kwargs(const std::vector<std::string>& kv) {
  json out = json::object();
  for (const auto& a : kv) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("task kwarg '" + a + "' is not key=value; write e.g. max_level=2");
    out[a.substr(0, eq)] = agentr1::parse_override_value(a.substr(eq + 1));
  }
  return out;
}

std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void print_readable(const json& r, bool first) {
  if (!first)
    std::cout << "[reward " << r.value("reward", 0.0) << (r.value("done", false) ? ", done]" : "]") << "\n";
  std::cout << r.value("observation", "") << "\n";
  const json& info = r.contains("info") ? r["info"] : json::object();
  if (info.contains("admissible_commands") && info["admissible_commands"].is_array() &&
      !info["admissible_commands"].empty()) {
    std::cout << "(admissible:";
    for (const auto& c : info["admissible_commands"]) std::cout << " | " << c.get<std::string>();
    std::cout << ")\n";
  }
  if (r.value("done", false)) std::cout << "episode over: " << line_of(info) << "\n";
}

int run_play(const PlayOpts& o) {
  agentr1::tasks::register_builtin_tasks();
  const auto family = agentr1::tasks::make_task_family(o.task, task_kwargs(o.kwargs));
  const auto split = agentr1::tasks::parse_data_split(o.split);
  if (o.index < 0) throw Error("--index must be >= 0, got " + std::to_string(o.index));
  const std::vector<agentr1::Sample> samples = family->make_dataset(split, o.index + 1, o.seed);
  if (static_cast<int64_t>(samples.size()) <= o.index)
    throw Error("task '" + o.task + "' has only " + std::to_string(samples.size()) + " samples in split '" +
                o.split + "'; choose a smaller --index");
  const agentr1::Sample& sample = samples[static_cast<size_t>(o.index)];
  std::unique_ptr<agentr1::tasks::PlayEpisode> ep = family->play_episode(sample);
  const bool interactive = !o.expert && isatty(0);

  json first = ep->reset();
  if (interactive) {
    print_readable(first, true);
  } else {
    std::cout << line_of(first) << "\n" << std::flush;
  }
  int steps = 0;
  while (!ep->done()) {
    std::string action;
    if (o.expert) {
      const std::optional<std::string> a = ep->expert_action();
      if (!a) throw Error("the expert of task '" + o.task + "' has no action after " + std::to_string(steps) + " steps");
      action = *a;
      if (++steps > 1000) throw Error("the expert of task '" + o.task + "' did not finish in 1000 steps");
    } else {
      if (interactive) std::cout << "> " << std::flush;
      if (!std::getline(std::cin, action)) break;
      if (!action.empty() && action.back() == '\r') action.pop_back();
      if (action.find_first_not_of(" \t") == std::string::npos) continue;
      if (interactive && action == "quit") break;
    }
    json r = ep->step(action);
    if (interactive) {
      print_readable(r, false);
    } else {
      json out = json::object();
      out["action"] = action;
      for (auto it = r.begin(); it != r.end(); ++it) out[it.key()] = it.value();
      std::cout << line_of(out) << "\n" << std::flush;
    }
  }
  return 0;
}

agentr1::cli::Registrar reg("play", "Play one episode of a task family by hand or with its expert (JSON lines)",
                            [](CLI::App& app) {
  auto o = std::make_shared<PlayOpts>();
  agentr1::tasks::register_builtin_tasks();
  std::string families;
  for (const auto& n : agentr1::tasks::task_family_names()) families += (families.empty() ? "" : ", ") + n;
  app.add_option("--task", o->task, "task family: " + families)->required();
  app.add_option("--seed", o->seed, "dataset seed (the episode is sample --index of it)")->check(agentr1::cli::uint64_text());
  app.add_option("--index", o->index, "which sample of the seed's dataset")->check(CLI::Range(0, 1000000000));
  app.add_option("--split", o->split, "train | test")->check(CLI::IsMember({"train", "test", "any"}));
  app.add_flag("--expert", o->expert, "the family's expert plays; each action is printed");
  app.add_option("kwargs", o->kwargs, "task kwargs key=value (as data.task_kwargs)");
  return [o]() -> int { return run_play(*o); };
});

}  // namespace
