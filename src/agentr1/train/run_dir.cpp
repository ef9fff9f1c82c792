#include "agentr1/train/run_dir.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agentr1/core/error.h"

namespace agentr1::train {

namespace fs = std::filesystem;

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  AGENTR1_CHECK(!ec, "cannot create directory '" << dir << "': " << ec.message());
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AGENTR1_CHECK(f, "cannot read '" << path << "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

RunDir::RunDir(std::string path) : path_(std::move(path)) { make_dirs(path_); }

void RunDir::write_text(const std::string& rel, const std::string& text) const {
  const std::string target = file(rel);
  make_dirs(fs::path(target).parent_path().string());
  const std::string tmp = target + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    AGENTR1_CHECK(f, "cannot write '" << tmp << "'");
    f << text;
    AGENTR1_CHECK(f.good(), "error writing '" << tmp << "'");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  AGENTR1_CHECK(!ec, "cannot rename '" << tmp << "' to '" << target << "': " << ec.message());
}

void RunDir::write_json(const std::string& rel, const json& j) const {
  write_text(rel, j.dump(2) + "\n");
}

void RunDir::append_jsonl(const std::string& rel, const json& j) const {
  const std::string target = file(rel);
  make_dirs(fs::path(target).parent_path().string());
  std::ofstream f(target, std::ios::binary | std::ios::app);
  AGENTR1_CHECK(f, "cannot append to '" << target << "'");
  f << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%06lld", static_cast<long long>(step));
  return buf;
}

json metrics_json(int64_t step, const std::map<std::string, double>& m) {
  json j;
  j["step"] = step;
  for (const auto& kv : m) j[kv.first] = kv.second;
  return j;
}

}  // namespace agentr1::train
