// agentr1/core/log.h — one leveled logger; libraries never write to stdout.
//
//   AGENTR1_LOG(INFO) << "loaded " << n << " samples";
//   set_log_level(LogLevel::kWarn);   // from --log-level / AGENTR1_LOG_LEVEL
//
// Messages go to stderr (thread-safe, one line per message). Metrics have their own
// sink (train layer), not this logger.
#pragma once

#include <sstream>
#include <string>

namespace agentr1 {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Parses "debug", "info", "warn", "error", "off"; throws Error naming the valid ones.
LogLevel parse_log_level(const std::string& name);
void log_write(LogLevel level, const std::string& msg);

class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine() { log_write(level_, os_.str()); }
  template <typename T>
  LogLine& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream os_;
};

}  // namespace agentr1

#define AGENTR1_LOG_DEBUG ::agentr1::LogLevel::kDebug
#define AGENTR1_LOG_INFO ::agentr1::LogLevel::kInfo
#define AGENTR1_LOG_WARN ::agentr1::LogLevel::kWarn
#define AGENTR1_LOG_ERROR ::agentr1::LogLevel::kError
#define AGENTR1_LOG(level)                                  \
  if (AGENTR1_LOG_##level < ::agentr1::log_level()) {       \
  } else                                                    \
    ::agentr1::LogLine(AGENTR1_LOG_##level)
