#include "agentr1/tasks/dataset.h"

#include <fstream>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

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

}  // namespace agentr1::tasks
