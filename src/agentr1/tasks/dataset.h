// agentr1/tasks/dataset.h — JSONL datasets of Samples, and the GSM8K converter.
//
//   std::vector<Sample> train = load_jsonl("data/arith/train.jsonl");
//   write_jsonl("out.jsonl", train);
//
//   JsonlReadOptions lenient;  lenient.skip_bad_rows = true;
//   int64_t skipped = 0;
//   auto rows = load_jsonl(path, lenient, &skipped);   // bad rows logged and counted
//
//   // GSM8K's own format: {"question": "...", "answer": "... #### 72"}
//   std::vector<Sample> gsm = load_gsm8k_jsonl("gsm8k/test.jsonl", "test");
//
// One JSON object per line; blank lines are ignored. Files are UTF-8.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/core/trajectory.h"

namespace agentr1::tasks {

struct JsonlReadOptions {
  bool skip_bad_rows = false;  // true: log a warning per malformed row and skip it; false: throw
  // load_jsonl only: called on every parsed Sample; throwing rejects the row like a
  // malformed one ("<path>:<line>: ...", or skipped with skip_bad_rows). E.g. the
  // trainer checks that the row's env, tools, context policy and reward resolve.
  std::function<void(const Sample&)> check;
};

// Every non-blank line parsed as JSON. A malformed line throws Error "<path>:<line>: ..."
// (or is skipped and counted in *skipped when opts.skip_bad_rows). Throws Error when
// the file cannot be opened.
std::vector<json> read_jsonl_rows(const std::string& path, const JsonlReadOptions& opts = {},
                                  int64_t* skipped = nullptr);

// Rows in the sample schema (Sample::from_json). Errors name "<path>:<line>" and the
// field problem; with opts.skip_bad_rows they are logged and counted instead.
std::vector<Sample> load_jsonl(const std::string& path, const JsonlReadOptions& opts = {},
                               int64_t* skipped = nullptr);
// The same from a stream; errors name "<source>:<line>".
std::vector<Sample> load_jsonl(std::istream& in, const std::string& source,
                               const JsonlReadOptions& opts = {}, int64_t* skipped = nullptr);

// One Sample::to_json() per line. Creates or truncates `path`; throws Error naming the
// path when it cannot be written.
void write_jsonl(const std::string& path, const std::vector<Sample>& samples);
// The same for arbitrary JSON rows.
void write_jsonl_rows(const std::string& path, const std::vector<json>& rows);

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
};

// The text after the last "####" with commas, '$' and surrounding spaces removed.
// Throws Error when there is no "####" or the rest is not a plain number.
std::string gsm8k_final_answer(const std::string& answer_text);

// {"question": ..., "answer": "... #### 72"} -> Sample with ground truth "72" and
// extra_info {split, index, answer, question} (verl's layout). Throws Error naming the
// row index when a field is missing / not a string or the answer has no "#### <number>".
Sample gsm8k_row_to_sample(const json& row, int64_t index, const std::string& split,
                           const Gsm8kConvertOptions& opts = {});

// read_jsonl_rows + gsm8k_row_to_sample for every row (index = row number from 0).
std::vector<Sample> load_gsm8k_jsonl(const std::string& path, const std::string& split,
                                     const Gsm8kConvertOptions& opts = {});

}  // namespace agentr1::tasks
