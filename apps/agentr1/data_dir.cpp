#include "data_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "agentr1/core/error.h"

namespace agentr1::cli {
namespace {

namespace fs = std::filesystem;

const char* env_data_dir() {
  const char* e = std::getenv("AGENTR1_DATA_DIR");
  return e != nullptr && *e != '\0' ? e : nullptr;
}

}  // namespace

std::string data_dir() {
  if (const char* e = env_data_dir()) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  AGENTR1_CHECK(!ec, "cannot find the agentr1 data dir: reading /proc/self/exe failed (" << ec.message()
                         << "). HINT: set AGENTR1_DATA_DIR to the build's share/agentr1 directory");
  return (exe.parent_path() / "share" / "agentr1").string();
}

std::string data_path(const std::string& rel) { return data_dir() + "/" + rel; }

std::string data_file(const std::string& rel) {
  const std::string p = data_path(rel);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p;
  const std::string from = env_data_dir() != nullptr ? "from AGENTR1_DATA_DIR" : "next to the agentr1 binary";
  throw Error("data file '" + p + "' not found (data dir " + from + "). HINT: re-run scripts/setup.sh (the " +
              "build copies configs/*.yaml and the Qwen3 chat template into <build>/share/agentr1/), or set " +
              "AGENTR1_DATA_DIR to a directory holding configs/ and qwen3_tokenizer_config.json");
}

}  // namespace agentr1::cli
