#include "agentr1/train/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
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

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

RunDir::RunDir(std::string path, bool create) : path_(std::move(path)) {
  if (create) make_dirs(path_);
}

void RunDir::write_text(const std::string& rel, const std::string& text) const {
  const std::string target = file(rel);
  make_dirs(fs::path(target).parent_path().string());
  const std::string tmp = target + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    AGENTR1_CHECK(f, "cannot write '" << tmp << "'");
    f << text;
    f.flush();
    AGENTR1_CHECK(f.good(), "error writing '" << tmp << "'");
  }
  fsync_path(tmp);
  std::error_code ec;
  fs::rename(tmp, target, ec);
  AGENTR1_CHECK(!ec, "cannot rename '" << tmp << "' to '" << target << "': " << ec.message());
  fsync_path(fs::path(target).parent_path().string());
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

bool RunDir::has_run() const {
  for (const char* f : {"metrics.jsonl", "summary.json", "checkpoints"})
    if (fs::exists(file(f))) return true;
  return false;
}

void RunDir::clear_run() const {
  for (const char* f : {"config.yaml", "metrics.jsonl", "summary.json", "trajectories", "checkpoints",
                        "remote_weights", "tensorboard"}) {
    std::error_code ec;
    fs::remove_all(file(f), ec);
    AGENTR1_CHECK(!ec, "cannot remove '" << file(f) << "': " << ec.message());
  }
}

size_t RunDir::cut_jsonl_after(const std::string& rel, int64_t step) const {
  const std::string path = file(rel);
  if (!fs::exists(path)) return 0;
  std::ifstream f(path, std::ios::binary);
  AGENTR1_CHECK(f, "cannot read '" << path << "'");
  std::string kept, line;
  size_t dropped = 0;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    const bool keep = !j.is_discarded() && j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                      j["step"].get<int64_t>() <= step;
    if (keep) {
      kept += line + "\n";
    } else {
      ++dropped;
    }
  }
  if (dropped > 0) write_text(rel, kept);
  return dropped;
}

size_t RunDir::cut_dumps_after(int64_t step) const {
  const std::string dir = file("trajectories");
  if (!fs::is_directory(dir)) return 0;
  static const std::regex re("(val_)?step_([0-9]+)\\.jsonl");
  size_t removed = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, re) || std::stoll(m[2]) <= step) continue;
    std::error_code ec;
    fs::remove(e.path(), ec);
    AGENTR1_CHECK(!ec, "cannot remove '" << e.path().string() << "': " << ec.message());
    ++removed;
  }
  return removed;
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
