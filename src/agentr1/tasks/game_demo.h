// agentr1/tasks/game_demo.h — SFT demonstrations from experts: the text of an assistant
// turn (tool calls or a game command) as the policy writes it, and whole text-game episodes.
//
//   AlfworldGame game(opts);
//   json demo = game_expert_demonstration(game, sample, tmpl, "<|im_end|>", &rendered, 60);
//   // {"sample": sample.to_json(), "actions": ["<action>go to fridge 1</action><|im_end|>", ...]}
//
// The actions are what a perfect policy writes under GameEnv (env/text_game.h): one
// command per turn in <action>...</action>, then end_of_turn. `rendered` (if non-null)
// gets the whole episode as GameEnv's messages would render it with an append-only
// context: the sample's prompt, the intro (with the admissible list when the sample's
// env_kwargs.show_admissible is true), then each assistant turn and the observation
// after it (none after the last), with no generation prompt and enable_thinking false.
#pragma once

#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"
#include "agentr1/env/text_game.h"
#include "agentr1/text/jinja/chat_template.h"

namespace agentr1::tasks {

// Hermes/Qwen form of one assistant message: its content, then for each tool call
// ("\n" between parts) <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, then
// end_of_turn. Object arguments are rendered with text::python_tojson (as the chat
// template does); string arguments are copied verbatim. A missing or non-string content
// counts as "". Throws Error (nlohmann's) when a tool call lacks "name" or "arguments".
std::string assistant_action_text(const json& message, const std::string& end_of_turn);

// The assistant text of one command: "<action>" + command + "</action>".
std::string game_action_text(const std::string& command);

// Runs game.expert_action() on `sample` until the game is done. Throws Error naming the
// sample when the expert has no action before the end, needs more than max_actions
// commands, or finishes with a total reward below 1 (an expert or generator bug).
json game_expert_demonstration(env::TextGame& game, const Sample& sample, const text::ChatTemplate& tmpl,
                               const std::string& end_of_turn, std::vector<std::string>* rendered,
                               int max_actions);

}  // namespace agentr1::tasks
