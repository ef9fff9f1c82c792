#include "agentr1/core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include "agentr1/core/error.h"

namespace agentr1 {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("AGENTR1_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  try {
    return parse_log_level(env);
  } catch (const Error&) {
    return LogLevel::kInfo;
  }
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

std::mutex& write_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void set_log_level(LogLevel level) { level_ref().store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(level_ref().load()); }

LogLevel parse_log_level(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  throw Error("unknown log level '" + name + "'; valid: debug, info, warn, error, off");
}

void log_write(LogLevel level, const std::string& msg) {
  static const char* kTags[] = {"D", "I", "W", "E", "-"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[16];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(write_mutex());
  std::fprintf(stderr, "[%s %s] %s\n", kTags[static_cast<int>(level)], stamp, msg.c_str());
}

}  // namespace agentr1
