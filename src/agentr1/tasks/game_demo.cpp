#include "agentr1/tasks/game_demo.h"

#include "agentr1/core/error.h"

namespace agentr1::tasks {
namespace {

json message(const char* role, const std::string& content) {
  json m = json::object();
  m["role"] = role;
  m["content"] = content;
  return m;
}

std::string with_admissible(const env::TextGame& game, const Sample& sample, std::string obs) {
  const json& sa = sample.env_kwargs.is_object() ? sample.env_kwargs.value("show_admissible", json(false)) : json(false);
  if (!sa.is_boolean() || !sa.get<bool>()) return obs;
  const std::vector<std::string> cmds = game.admissible_commands();
  if (cmds.empty()) return obs;
  obs += "\n\nAdmissible actions: ";
  for (size_t i = 0; i < cmds.size(); ++i) obs += (i ? ", " : "") + cmds[i];
  return obs;
}

}  // namespace

std::string assistant_action_text(const json& message, const std::string& end_of_turn) {
  std::string out;
  if (message.contains("content") && message["content"].is_string()) out = message["content"].get<std::string>();
  if (message.contains("tool_calls") && message["tool_calls"].is_array()) {
    bool first = true;
    for (const auto& call : message["tool_calls"]) {
      const json& fn = call.contains("function") ? call["function"] : call;
      if (!first || !out.empty()) out += "\n";
      first = false;
      out += "<tool_call>\n{\"name\": \"" + fn.at("name").get<std::string>() + "\", \"arguments\": ";
      const json& args = fn.at("arguments");
      out += args.is_string() ? args.get<std::string>() : text::python_tojson(args);
      out += "}\n</tool_call>";
    }
  }
  return out + end_of_turn;
}

std::string game_action_text(const std::string& command) { return "<action>" + command + "</action>"; }

json game_expert_demonstration(env::TextGame& game, const Sample& sample, const text::ChatTemplate& tmpl,
                               const std::string& end_of_turn, std::vector<std::string>* rendered,
                               int max_actions) {
  json messages = sample.prompt;
  const std::string intro = game.reset(sample);
  if (!intro.empty()) messages.push_back(message("user", with_admissible(game, sample, intro)));
  json actions = json::array();
  float total = 0;
  const std::string who = "expert demonstration of '" + sample.data_source + "' sample " +
                          sample.extra_info.dump().substr(0, 200);
  for (int i = 0;; ++i) {
    AGENTR1_CHECK(i < max_actions, who << ": the expert needs more than " << max_actions << " actions");
    const std::optional<std::string> cmd = game.expert_action();
    AGENTR1_CHECK(cmd.has_value(), who << ": the expert has no action after " << i << " actions");
    const env::GameStep g = game.step(*cmd);
    total += g.reward;
    actions.push_back(game_action_text(*cmd) + end_of_turn);
    messages.push_back(message("assistant", game_action_text(*cmd)));
    if (g.done) break;
    messages.push_back(message("user", with_admissible(game, sample, g.observation)));
  }
  AGENTR1_CHECK(total >= 1.0f, who << ": the expert finished with reward " << total << " (< 1)");
  if (rendered != nullptr) {
    text::RenderOptions ro;
    ro.enable_thinking = false;
    rendered->push_back(tmpl.render(messages, json(), /*add_generation_prompt=*/false, ro));
  }
  json demo = json::object();
  demo["sample"] = sample.to_json();
  demo["actions"] = std::move(actions);
  return demo;
}

}  // namespace agentr1::tasks
