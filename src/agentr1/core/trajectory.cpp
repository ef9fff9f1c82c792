#include "agentr1/core/trajectory.h"

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

json Step::to_json() const {
  json j;
  j["prompt_ids"] = prompt_ids;
  j["response_ids"] = response_ids;
  j["response_logprobs"] = response_logprobs;
  j["reward"] = reward;
  j["done"] = done;
  j["truncated"] = truncated;
  j["info"] = info;
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
  t.outcome_reward = j.value("outcome_reward", 0.0f);
  if (j.contains("metrics")) t.metrics = j["metrics"];
  for (const auto& s : j.at("steps")) t.steps.push_back(Step::from_json(s));
  return t;
}

}  // namespace agentr1
