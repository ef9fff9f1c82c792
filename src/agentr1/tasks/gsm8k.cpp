#include "agentr1/tasks/gsm8k.h"

#include "agentr1/core/error.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {

std::string gsm8k_final_answer(const std::string& answer_text) {
  size_t pos = answer_text.rfind("####");
  AGENTR1_CHECK(pos != std::string::npos,
                "answer has no '#### <number>' line: \"..." << answer_text.substr(answer_text.size() > 60 ? answer_text.size() - 60 : 0) << "\"");
  std::string rest = answer_text.substr(pos + 4);
  size_t b = rest.find_first_not_of(" \t\r\n");
  size_t e = rest.find_last_not_of(" \t\r\n");
  rest = b == std::string::npos ? "" : rest.substr(b, e - b + 1);
  std::string cleaned;
  for (char c : rest) {
    if (c != ',' && c != '$') cleaned += c;
  }
  AGENTR1_CHECK(normalize_number(cleaned).has_value(),
                "the text after '####' must be a plain number, got \"" << rest.substr(0, 40) << "\"");
  return cleaned;
}

Sample gsm8k_row_to_sample(const json& row, int64_t index, const std::string& split,
                           const Gsm8kConvertOptions& opts) {
  return with_context("GSM8K row " + std::to_string(index), [&] {
    AGENTR1_CHECK(row.is_object(), "expected an object {\"question\": ..., \"answer\": ...}, got "
                                       << row.type_name());
    for (const char* key : {"question", "answer"}) {
      AGENTR1_CHECK(row.contains(key) && row[key].is_string(),
                    "field '" << key << "' is missing or not a string");
    }
    const std::string question = row["question"].get<std::string>();
    const std::string answer = row["answer"].get<std::string>();
    Sample s;
    if (opts.use_system_prompt) s.prompt.push_back({{"role", "system"}, {"content", opts.system_prompt}});
    s.prompt.push_back({{"role", "user"},
                        {"content", opts.instruction.empty() ? question : question + " " + opts.instruction}});
    s.ground_truth = gsm8k_final_answer(answer);
    s.reward_style = "rule";
    s.data_source = opts.data_source;
    if (opts.use_calculator) {
      s.agent_name = "tool";
      s.env_kwargs = {{"tools", json::array({"calculator"})}};
    }
    s.extra_info = {{"split", split}, {"index", index}, {"answer", answer}, {"question", question}};
    return s;
  });
}

}  // namespace agentr1::tasks
