#include "agentr1/tasks/dataset.h"

#include <fstream>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/tasks/reward.h"

namespace agentr1::tasks {
namespace {

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// Calls fn(row, line_no) for every non-blank line; handles parse errors and the
// skip policy in one place. fn throws to reject a row.
template <typename Fn>
void for_each_row(std::istream& in, const std::string& path, const JsonlReadOptions& opts,
                  int64_t* skipped, Fn&& fn) {
  std::string line;
  int64_t line_no = 0;
  int64_t n_skipped = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (is_blank(line)) continue;
    std::string where = path + ":" + std::to_string(line_no);
    try {
      json row;
      try {
        row = json::parse(line);
      } catch (const json::parse_error& e) {
        throw Error(std::string("not valid JSON (") + e.what() + ")");
      }
      fn(row, line_no);
    } catch (const std::exception& e) {
      if (!opts.skip_bad_rows) {
        throw Error(where + ": " + e.what() +
                    " (HINT: fix the row, or read with skip_bad_rows to skip bad rows)");
      }
      ++n_skipped;
      AGENTR1_LOG(WARN) << where << ": skipping bad row: " << e.what();
    }
  }
  if (n_skipped > 0) {
    AGENTR1_LOG(WARN) << path << ": skipped " << n_skipped << " bad row(s)";
  }
  if (skipped) *skipped = n_skipped;
}

template <typename Fn>
void for_each_row(const std::string& path, const JsonlReadOptions& opts, int64_t* skipped, Fn&& fn) {
  std::ifstream in(path, std::ios::binary);
  AGENTR1_CHECK(in.good(), "cannot open JSONL file '" << path << "' for reading; check the path");
  for_each_row(in, path, opts, skipped, fn);
}

std::vector<Sample> read_samples(std::istream* in, const std::string& path,
                                 const JsonlReadOptions& opts, int64_t* skipped) {
  std::vector<Sample> samples;
  auto add = [&](json& row, int64_t) {
    Sample s = Sample::from_json(row);
    if (opts.check) opts.check(s);
    samples.push_back(std::move(s));
  };
  if (in) for_each_row(*in, path, opts, skipped, add);
  else for_each_row(path, opts, skipped, add);
  return samples;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  AGENTR1_CHECK(out.good(), "cannot open '" << path << "' for writing; check that the directory exists");
  for (const auto& l : lines) out << l << '\n';
  out.flush();
  AGENTR1_CHECK(out.good(), "writing '" << path << "' failed (disk full?)");
}

}  // namespace

std::vector<json> read_jsonl_rows(const std::string& path, const JsonlReadOptions& opts, int64_t* skipped) {
  std::vector<json> rows;
  for_each_row(path, opts, skipped, [&](json& row, int64_t) { rows.push_back(std::move(row)); });
  return rows;
}

std::vector<Sample> load_jsonl(const std::string& path, const JsonlReadOptions& opts, int64_t* skipped) {
  return read_samples(nullptr, path, opts, skipped);
}

std::vector<Sample> load_jsonl(std::istream& in, const std::string& source,
                               const JsonlReadOptions& opts, int64_t* skipped) {
  return read_samples(&in, source, opts, skipped);
}

void write_jsonl(const std::string& path, const std::vector<Sample>& samples) {
  std::vector<std::string> lines;
  lines.reserve(samples.size());
  for (const auto& s : samples) lines.push_back(s.to_json().dump());
  write_lines(path, lines);
}

void write_jsonl_rows(const std::string& path, const std::vector<json>& rows) {
  std::vector<std::string> lines;
  lines.reserve(rows.size());
  for (const auto& r : rows) lines.push_back(r.dump());
  write_lines(path, lines);
}

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

std::vector<Sample> load_gsm8k_jsonl(const std::string& path, const std::string& split,
                                     const Gsm8kConvertOptions& opts) {
  std::vector<json> rows = read_jsonl_rows(path);
  std::vector<Sample> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out.push_back(with_context(path, [&] { return gsm8k_row_to_sample(rows[i], static_cast<int64_t>(i), split, opts); }));
  }
  return out;
}

}  // namespace agentr1::tasks
