// agentr1/tasks/dataset.h — JSONL datasets of Samples (GSM8K's own format is converted
// by tasks/data_convert.h).
//
//   std::vector<Sample> train = load_jsonl("data/arith/train.jsonl");
//   write_jsonl("out.jsonl", train);
//
//   JsonlReadOptions lenient;  lenient.skip_bad_rows = true;
//   int64_t skipped = 0;
//   auto rows = load_jsonl(path, lenient, &skipped);   // bad rows logged and counted
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

}  // namespace agentr1::tasks
