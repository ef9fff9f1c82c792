// agentr1/tasks/play.h — one episode of a task family played by hand or by its expert,
// without a model or tokenizer (agentr1 play; tests of experts and rewards).
//
//   auto fam = make_task_family("alfworld");
//   Sample s = fam->make_dataset(DataSplit::kTest, 1, /*seed=*/3)[0];
//   std::unique_ptr<PlayEpisode> ep = fam->play_episode(s);
//   json first = ep->reset();                  // {"observation": "...", "info": {...}}
//   while (!ep->done()) {
//     std::string a = *ep->expert_action();    // or a line a person typed
//     json r = ep->step(a);                    // {"observation", "reward", "done", "info"}
//   }
//
// Two kinds:
//   game episodes (make_game_episode): the action is a game command ("go to desk 1",
//     "search[red shoes]"); observation, reward and done are the game's; the expert is
//     the game's; the final line's info includes the game's summary().
//   tool episodes (make_tool_episode), for tool-calling families (arithmetic, hotpotqa):
//     an action is either a tool call — a JSON object {"name": ..., "arguments": {...}}
//     or hermes markup <tool_call>{...}</tool_call> — whose observation is the tool's
//     output (errors as text, as ToolEnv shows them), or anything else, which is the
//     final answer: the episode ends with the sample's reward function on that text
//     (reward = outcome reward; info has "ground_truth" and the answer).
// Rewards: a game's reward per step; a tool episode's reward only at its answer. A
// malformed action is an observation, never an exception.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/env/text_game.h"

namespace agentr1::tasks {

class PlayEpisode {
 public:
  virtual ~PlayEpisode() = default;
  // Starts the episode: {"observation": text, "info": {...}}.
  virtual json reset() = 0;
  // One action: {"observation": text, "reward": r, "done": bool, "info": {...}}. Throws
  // Error when called before reset() or after the episode ended (a caller bug).
  virtual json step(const std::string& action) = 0;
  // The expert's next action (nullopt when it has none).
  virtual std::optional<std::string> expert_action() = 0;
  virtual bool done() const = 0;
};

// A game episode of `sample` (its env_kwargs.game configure the game already made).
std::unique_ptr<PlayEpisode> make_game_episode(std::unique_ptr<env::TextGame> game, Sample sample);

// A tool episode of `sample`: tools from env_kwargs.tools / tool_kwargs (env::make_tool),
// the first observation is the text of the sample's last user message, the reward
// function is the sample's (data_source, else reward style; tasks::make_reward_fn).
// expert_actions: the expert's actions in order, in the action syntax above.
std::unique_ptr<PlayEpisode> make_tool_episode(Sample sample, std::vector<std::string> expert_actions);

}  // namespace agentr1::tasks
