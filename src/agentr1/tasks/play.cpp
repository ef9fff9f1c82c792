#include "agentr1/tasks/play.h"

#include <algorithm>
#include <utility>

#include "agentr1/core/error.h"
#include "agentr1/env/tool.h"
#include "agentr1/tasks/reward.h"
#include "agentr1/tasks/task_family.h"
#include "agentr1/text/tool_format/tool_format.h"

namespace agentr1::tasks {
namespace {

class GameEpisode : public PlayEpisode {
 public:
  GameEpisode(std::unique_ptr<env::TextGame> game, Sample sample)
      : game_(std::move(game)), sample_(std::move(sample)) {
    AGENTR1_CHECK(game_ != nullptr, "make_game_episode: the game is null");
  }

  json reset() override {
    const std::string obs = game_->reset(sample_);
    started_ = true;
    done_ = false;
    json out = json::object();
    out["observation"] = obs;
    json info = json::object();
    info["admissible_commands"] = game_->admissible_commands();
    info["goal"] = sample_.ground_truth;
    out["info"] = std::move(info);
    return out;
  }

  json step(const std::string& action) override {
    AGENTR1_CHECK(started_, "play: step before reset");
    AGENTR1_CHECK(!done_, "play: step after the episode ended");
    const env::GameStep g = game_->step(action);
    done_ = g.done;
    json out = json::object();
    out["observation"] = g.observation;
    out["reward"] = g.reward;
    out["done"] = g.done;
    json info = g.info.is_object() ? g.info : json::object();
    info["admissible_commands"] = game_->admissible_commands();
    if (g.done) info["summary"] = game_->summary();
    out["info"] = std::move(info);
    return out;
  }

  std::optional<std::string> expert_action() override { return done_ ? std::nullopt : game_->expert_action(); }
  bool done() const override { return done_; }

 private:
  std::unique_ptr<env::TextGame> game_;
  Sample sample_;
  bool started_ = false;
  bool done_ = false;
};

std::string last_user_text(const Sample& s) {
  if (!s.prompt.is_array()) return "";
  for (auto it = s.prompt.rbegin(); it != s.prompt.rend(); ++it)
    if (it->is_object() && it->value("role", "") == "user" && (*it)["content"].is_string())
      return (*it)["content"].get<std::string>();
  return "";
}

// The tool formats an action may be written in. The sample's env_kwargs.tool_format
// when it names one (what ToolEnv uses). With "auto" or none, ToolEnv takes the chat
// template's format (text::default_tool_format), but play has no model or template, so
// every registered format is accepted: an action is read by the first format that finds
// tool-call markup in it, in the order hermes, mistral, deepseek_v3, gpt_oss, formats
// registered later, and llama3_json last (it reads any {"name": ...} object after text
// as a call, e.g. inside another format's block).
std::vector<std::unique_ptr<text::ToolFormat>> action_formats(const json& kw) {
  const std::vector<std::string> known = text::tool_format_names();
  std::string name = "auto";
  if (kw.is_object() && kw.contains("tool_format") && !kw["tool_format"].is_null()) {
    const json& f = kw["tool_format"];
    AGENTR1_CHECK(f.is_string(), "play: the sample's env_kwargs.tool_format must be a string (a tool "
                                 "format name or auto), got " << f.dump().substr(0, 80));
    name = f.get<std::string>();
  }
  std::vector<std::unique_ptr<text::ToolFormat>> out;
  if (name != "auto") {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    AGENTR1_CHECK(std::find(known.begin(), known.end(), name) != known.end(),
                  "play: the sample's env_kwargs.tool_format is '"
                      << name << "', which is not a registered tool format; known: " << list
                      << ", or auto (any of them)");
    out.push_back(text::make_tool_format(name));
    return out;
  }
  std::vector<std::string> order = {"hermes", "mistral", "deepseek_v3", "gpt_oss"};
  for (const auto& k : known)
    if (k != "llama3_json" && std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
  order.push_back("llama3_json");
  for (const auto& k : order)
    if (std::find(known.begin(), known.end(), k) != known.end()) out.push_back(text::make_tool_format(k));
  return out;
}

class ToolEpisode : public PlayEpisode {
 public:
  ToolEpisode(Sample sample, std::vector<std::string> expert)
      : sample_(std::move(sample)), expert_(std::move(expert)), formats_(action_formats(sample_.env_kwargs)) {
    const json& kw = sample_.env_kwargs;
    const json names = kw.is_object() ? kw.value("tools", json::array()) : json::array();
    const json tool_kwargs = kw.is_object() ? kw.value("tool_kwargs", json::object()) : json::object();
    AGENTR1_CHECK(names.is_array(), "play: the sample's env_kwargs.tools must be a list of tool names, got "
                                        << names.dump());
    for (const auto& n : names) {
      AGENTR1_CHECK(n.is_string(), "play: tool names must be strings, got " << n.dump());
      const std::string name = n.get<std::string>();
      tools_.push_back(env::make_tool(name, tool_kwargs.value(name, json::object())));
    }
    std::string fn = sample_.data_source;
    if (!has_reward_fn(fn)) fn = sample_.reward_style;
    reward_fn_name_ = fn;
    reward_ = make_reward_fn(fn);
  }

  json reset() override {
    started_ = true;
    done_ = false;
    next_expert_ = 0;
    json out = json::object();
    out["observation"] = last_user_text(sample_);
    json info = json::object();
    json tools = json::array();
    for (const auto& t : tools_) tools.push_back(t->name());
    info["tools"] = std::move(tools);
    out["info"] = std::move(info);
    return out;
  }

  json step(const std::string& action) override {
    AGENTR1_CHECK(started_, "play: step before reset");
    AGENTR1_CHECK(!done_, "play: step after the episode ended");
    ++next_expert_;
    json out = json::object();
    json info = json::object();
    std::vector<std::pair<std::string, json>> calls;
    std::vector<std::string> errors;
    const json as_json = json::parse(action, nullptr, /*allow_exceptions=*/false);
    if (as_json.is_object() && as_json.contains("name")) {
      if (!as_json["name"].is_string() || !as_json.value("arguments", json()).is_object())
        errors.push_back("Error: a tool call needs \"name\" (a string) and \"arguments\" (an object)");
      else
        calls.emplace_back(as_json["name"].get<std::string>(), as_json["arguments"]);
    } else {
      text::ParsedResponse p;
      for (const auto& f : formats_) {
        p = f->parse(action);
        if (p.has_tool_call_markup()) {
          info["tool_format"] = f->name();
          break;
        }
      }
      if (p.has_tool_call_markup()) {
        for (const auto& c : p.calls) calls.emplace_back(c.name, c.arguments);
        for (const auto& e : p.errors) errors.push_back("Error: malformed tool call: " + e.message);
      } else {
        // The final answer.
        const float r = reward_(action, sample_.ground_truth, sample_.extra_info);
        done_ = true;
        out["observation"] = "";
        out["reward"] = r;
        out["done"] = true;
        info["answer"] = action;
        info["ground_truth"] = sample_.ground_truth;
        info["reward_fn"] = reward_fn_name_;
        out["info"] = std::move(info);
        return out;
      }
    }
    std::string obs;
    json call_info = json::array();
    for (const auto& [name, args] : calls) {
      std::string text;
      std::string status = "ok";
      env::Tool* tool = nullptr;
      for (auto& t : tools_)
        if (t->name() == name) tool = t.get();
      if (tool == nullptr) {
        std::string known;
        for (auto& t : tools_) known += (known.empty() ? "" : ", ") + t->name();
        text = "Error: unknown tool '" + name + "'; available tools: " + known;
        status = "unknown_tool";
      } else {
        try {
          text = tool->execute(args).text;
        } catch (const std::exception& e) {
          text = "Error: tool '" + name + "' failed: " + e.what();
          status = "error";
        }
      }
      obs += (obs.empty() ? "" : "\n") + text;
      json c = json::object();
      c["name"] = name;
      c["status"] = status;
      call_info.push_back(std::move(c));
    }
    for (const auto& e : errors) obs += (obs.empty() ? "" : "\n") + e;
    info["calls"] = std::move(call_info);
    out["observation"] = obs;
    out["reward"] = 0.0;
    out["done"] = false;
    out["info"] = std::move(info);
    return out;
  }

  std::optional<std::string> expert_action() override {
    if (done_ || next_expert_ >= expert_.size()) return std::nullopt;
    return expert_[next_expert_];
  }
  bool done() const override { return done_; }

 private:
  Sample sample_;
  std::vector<std::string> expert_;
  std::vector<std::unique_ptr<text::ToolFormat>> formats_;  // action_formats(env_kwargs)
  std::vector<std::unique_ptr<env::Tool>> tools_;
  std::string reward_fn_name_;
  RewardFn reward_;
  size_t next_expert_ = 0;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<PlayEpisode> make_game_episode(std::unique_ptr<env::TextGame> game, Sample sample) {
  return std::make_unique<GameEpisode>(std::move(game), std::move(sample));
}

std::unique_ptr<PlayEpisode> make_tool_episode(Sample sample, std::vector<std::string> expert_actions) {
  return std::make_unique<ToolEpisode>(std::move(sample), std::move(expert_actions));
}

std::unique_ptr<PlayEpisode> TaskFamily::play_episode(const Sample& sample) const {
  if (env::has_game(sample.agent_name)) {
    const json& kw = sample.env_kwargs;
    const json game_kwargs = kw.is_object() ? kw.value("game", json::object()) : json::object();
    return make_game_episode(env::make_game(sample.agent_name, game_kwargs), sample);
  }
  return make_tool_episode(sample, {});
}

}  // namespace agentr1::tasks
