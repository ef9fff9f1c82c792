#include "agentr1/core/trajectory.h"

#include <map>

#include "agentr1/core/error.h"

namespace agentr1 {

Sample Sample::from_json(const json& row) {
  AGENTR1_CHECK(row.is_object(), "sample must be a JSON object, got " << row.type_name());
  Sample s;
  AGENTR1_CHECK(row.contains("prompt"),
                "sample has no 'prompt' field (expected a list of chat messages)");
  const json& prompt = row.at("prompt");
  AGENTR1_CHECK(prompt.is_array() && !prompt.empty(),
                "sample 'prompt' must be a non-empty list of chat messages, got "
                    << prompt.dump().substr(0, 80));
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& m = prompt[i];
    AGENTR1_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(),
                  "sample 'prompt[" << i << "]' must be an object with a string 'role'");
    AGENTR1_CHECK(m.contains("content") && (m["content"].is_string() || m["content"].is_null()),
                  "sample 'prompt[" << i << "].content' must be a string");
  }
  s.prompt = prompt;
  if (row.contains("agent_name") && !row["agent_name"].is_null()) {
    AGENTR1_CHECK(row["agent_name"].is_string(), "sample 'agent_name' must be a string");
    s.agent_name = row["agent_name"].get<std::string>();
  }
  if (row.contains("reward_model") && !row["reward_model"].is_null()) {
    const json& rm = row["reward_model"];
    AGENTR1_CHECK(rm.is_object(), "sample 'reward_model' must be an object "
                                  "{\"style\": ..., \"ground_truth\": ...}");
    if (rm.contains("style")) {
      AGENTR1_CHECK(rm["style"].is_string(), "sample 'reward_model.style' must be a string");
      s.reward_style = rm["style"].get<std::string>();
    }
    if (rm.contains("ground_truth")) s.ground_truth = rm["ground_truth"];
  }
  if (row.contains("env_kwargs") && !row["env_kwargs"].is_null()) {
    const json& kw = row["env_kwargs"];
    if (kw.is_string()) {
      // Agent-R1's preprocessing scripts store env_kwargs as a string holding a JSON
      // object (json.dumps of the dict, as parquet/Arrow columns need one type).
      const std::string& text = kw.get_ref<const std::string&>();
      json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
      AGENTR1_CHECK(!parsed.is_discarded(),
                    "sample 'env_kwargs' is a string but not valid JSON: "
                        << json(text.substr(0, 80)).dump()
                        << ". HINT: give env_kwargs as an object, or as a string holding "
                           "a JSON object, e.g. {\"max_turns\": 3}");
      AGENTR1_CHECK(parsed.is_object(),
                    "sample 'env_kwargs' is a string holding JSON " << parsed.type_name()
                        << " " << parsed.dump().substr(0, 80)
                        << ", but it must hold a JSON object");
      s.env_kwargs = std::move(parsed);
    } else {
      AGENTR1_CHECK(kw.is_object(),
                    "sample 'env_kwargs' must be an object (or a string holding a JSON "
                    "object), got " << kw.type_name() << " " << kw.dump().substr(0, 80));
      s.env_kwargs = kw;
    }
  }
  if (row.contains("data_source") && !row["data_source"].is_null()) {
    AGENTR1_CHECK(row["data_source"].is_string(), "sample 'data_source' must be a string");
    s.data_source = row["data_source"].get<std::string>();
  }
  if (row.contains("extra_info") && !row["extra_info"].is_null()) s.extra_info = row["extra_info"];
  return s;
}

json Sample::to_json() const {
  json j;
  j["prompt"] = prompt;
  j["agent_name"] = agent_name;
  j["reward_model"] = {{"style", reward_style}, {"ground_truth", ground_truth}};
  j["env_kwargs"] = env_kwargs;
  j["data_source"] = data_source;
  j["extra_info"] = extra_info;
  return j;
}

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kAction: return "action";
    case StepKind::kSummary: return "summary";
  }
  return "unknown";
}

namespace {

// The info keys of Step's typed fields, in the order to_json writes them.
constexpr const char* kKindKey = "kind";
constexpr const char* kFinishKey = "finish_reason";
constexpr const char* kAnchorKey = "anchor";
constexpr const char* kGameRewardKey = "game_reward";
constexpr const char* kFieldKeys[] = {kKindKey, kFinishKey, kAnchorKey, kGameRewardKey};

constexpr FinishReason kFinishReasons[] = {FinishReason::kStopToken, FinishReason::kStopString,
                                           FinishReason::kLength, FinishReason::kContextFull,
                                           FinishReason::kAborted};
constexpr StepKind kStepKinds[] = {StepKind::kAction, StepKind::kSummary};

std::string finish_reason_names() {
  std::string out;
  for (FinishReason f : kFinishReasons) out += std::string(out.empty() ? "" : ", ") + finish_reason_name(f);
  return out;
}

}  // namespace

bool is_step_field_info_key(const std::string& key) {
  for (const char* k : kFieldKeys)
    if (key == k) return true;
  return false;
}

json Step::to_json() const {
  json j;
  j["prompt_ids"] = prompt_ids;
  j["response_ids"] = response_ids;
  j["response_logprobs"] = response_logprobs;
  j["reward"] = reward;
  j["done"] = done;
  j["truncated"] = truncated;
  json info_j = json::object();
  if (kind != StepKind::kAction) info_j[kKindKey] = step_kind_name(kind);
  if (finish) info_j[kFinishKey] = finish_reason_name(*finish);
  if (!anchor.empty()) info_j[kAnchorKey] = anchor;
  if (game_reward) info_j[kGameRewardKey] = *game_reward;
  AGENTR1_CHECK(info.is_object() || info.is_null(),
                "Step::info must be a JSON object, got " << info.type_name());
  if (info.is_object()) {
    for (auto it = info.begin(); it != info.end(); ++it) {
      AGENTR1_CHECK(!is_step_field_info_key(it.key()),
                    "Step::info holds '" << it.key()
                                         << "', the on-disk key of a typed field of Step (kind, finish, "
                                            "anchor, game_reward); set the field instead");
      info_j[it.key()] = it.value();
    }
  }
  j["info"] = std::move(info_j);
  j["policy_version"] = policy_version;
  return j;
}

Step Step::from_json(const json& j) {
  Step s;
  s.prompt_ids = j.at("prompt_ids").get<TokenIds>();
  s.response_ids = j.at("response_ids").get<TokenIds>();
  s.response_logprobs = j.at("response_logprobs").get<std::vector<float>>();
  s.reward = j.value("reward", 0.0f);
  s.done = j.value("done", false);
  s.truncated = j.value("truncated", false);
  if (j.contains("info")) s.info = j["info"];
  if (s.info.is_object()) {
    json& info = s.info;
    if (auto it = info.find(kKindKey); it != info.end()) {
      bool known = false;
      for (StepKind k : kStepKinds)
        if (*it == step_kind_name(k)) {
          s.kind = k;
          known = true;
        }
      AGENTR1_CHECK(known, "step info 'kind' must be \"action\" or \"summary\", got " << it->dump());
      info.erase(it);
    }
    if (auto it = info.find(kFinishKey); it != info.end()) {
      for (FinishReason f : kFinishReasons)
        if (*it == finish_reason_name(f)) s.finish = f;
      AGENTR1_CHECK(s.finish.has_value(), "step info 'finish_reason' must be one of "
                                              << finish_reason_names() << ", got "
                                              << it->dump());
      info.erase(it);
    }
    if (auto it = info.find(kAnchorKey); it != info.end()) {
      AGENTR1_CHECK(it->is_string(), "step info 'anchor' must be a string, got " << it->dump().substr(0, 80));
      s.anchor = it->get<std::string>();
      info.erase(it);
    }
    if (auto it = info.find(kGameRewardKey); it != info.end()) {
      AGENTR1_CHECK(it->is_number(), "step info 'game_reward' must be a number, got " << it->dump().substr(0, 80));
      s.game_reward = it->get<float>();
      info.erase(it);
    }
  }
  s.policy_version = j.value("policy_version", int64_t{0});
  return s;
}

float Trajectory::total_reward() const {
  float r = outcome_reward;
  for (const auto& s : steps) r += s.reward;
  return r;
}

json Trajectory::to_json() const {
  json j;
  j["uid"] = uid;
  j["group"] = group;
  if (!data_source.empty()) j["data_source"] = data_source;
  if (!infra_failure.empty()) j["infra_failure"] = infra_failure;
  j["outcome_reward"] = outcome_reward;
  j["metrics"] = metrics;
  json steps_j = json::array();
  for (const auto& s : steps) steps_j.push_back(s.to_json());
  j["steps"] = std::move(steps_j);
  return j;
}

Trajectory Trajectory::from_json(const json& j) {
  Trajectory t;
  t.uid = j.value("uid", "");
  t.group = j.value("group", "");
  t.data_source = j.value("data_source", "");
  t.infra_failure = j.value("infra_failure", "");
  t.outcome_reward = j.value("outcome_reward", 0.0f);
  if (j.contains("metrics")) t.metrics = j["metrics"];
  for (const auto& s : j.at("steps")) t.steps.push_back(Step::from_json(s));
  return t;
}

InfraSplit take_infra_failures(std::vector<Trajectory>& trajs) {
  InfraSplit out;
  std::map<std::string, int> before, after;  // members per group
  for (const auto& t : trajs) {
    ++before[t.group];
    if (t.infra_failure.empty()) ++after[t.group];
  }
  std::vector<Trajectory> kept;
  for (auto& t : trajs) {
    if (!t.infra_failure.empty())
      out.failed.push_back(std::move(t));
    else if (before[t.group] > 1 && after[t.group] == 1)
      out.orphaned.push_back(std::move(t));
    else
      kept.push_back(std::move(t));
  }
  trajs = std::move(kept);
  return out;
}

}  // namespace agentr1
