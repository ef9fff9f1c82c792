// agentr1/tasks/gsm8k.h — GSM8K's own row format ({"question": ..., "answer": "... #### 72"},
// openai/gsm8k) as Samples. `agentr1 data convert --format gsm8k` reads files with it
// (tasks/data_convert.h); the reward is the "gsm8k" rule (tasks/reward.h).
//
//   Sample s = gsm8k_row_to_sample({{"question", "Q?"}, {"answer", "3 + 4 = 7\n#### 7"}},
//                                  /*index=*/0, "test");   // ground_truth "7", calculator tool
//   gsm8k_final_answer("x\n#### 1,234 ");                 // "1234"
#pragma once

#include <cstdint>
#include <string>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"

namespace agentr1::tasks {

struct Gsm8kConvertOptions {
  bool use_calculator = true;       // agent_name "tool" + env_kwargs {"tools": ["calculator"]}
  bool use_system_prompt = true;    // prepend system_prompt
  std::string system_prompt =       // short: meant for small models
      "You are a careful math assistant. Use the calculator tool for every calculation. "
      "End your reply with the final answer on its own line as #### <number>.";
  std::string instruction;          // appended to the question after a space ("" = none);
                                    // verl uses "Let's think step by step and output the
                                    // final answer after \"####\"."
  std::string data_source = "openai/gsm8k";  // verl's name; selects the reward function

  // The keys `agentr1 data convert gsm8k` takes (system_prompt comes from its own flag).
  template <class V>
  void visit(V& v) {
    v.field("use_calculator", use_calculator, "agent_name tool + the calculator tool");
    v.field("instruction", instruction, "appended to the question after a space");
    v.field("data_source", data_source, "the samples' data_source (selects the reward function)");
    v.field("use_system_prompt", use_system_prompt, "prepend the system prompt");
  }
};

// The text after the last "####" with commas, '$' and surrounding spaces removed.
// Throws Error when there is no "####" or the rest is not a plain number.
std::string gsm8k_final_answer(const std::string& answer_text);

// {"question": ..., "answer": "... #### 72"} -> Sample with ground truth "72" and
// extra_info {split, index, answer, question} (verl's layout). Throws Error naming the
// row index when a field is missing / not a string or the answer has no "#### <number>".
Sample gsm8k_row_to_sample(const json& row, int64_t index, const std::string& split,
                           const Gsm8kConvertOptions& opts = {});

}  // namespace agentr1::tasks
