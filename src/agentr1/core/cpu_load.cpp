#include "agentr1/core/cpu_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::core {

namespace {

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double self_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::optional<CpuTimes> read_proc_stat() {
#if defined(__linux__)
  std::ifstream f("/proc/stat");
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  try {
    return parse_proc_stat(ss.str(), ticks > 0 ? ticks : 100.0);
  } catch (const Error&) {
    return std::nullopt;
  }
#else
  return std::nullopt;
#endif
}

}  // namespace

CpuTimes parse_proc_stat(const std::string& text, double ticks_per_s) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;
    std::istringstream ls(line.substr(4));
    // user nice system idle iowait irq softirq steal [guest guest_nice] (guest time is
    // already inside user and nice)
    std::vector<double> v;
    double x = 0;
    while (ls >> x) v.push_back(x);
    AGENTR1_CHECK(v.size() >= 8, "/proc/stat: the 'cpu' line needs at least 8 counters (user nice system idle "
                                 "iowait irq softirq steal), got "
                                     << v.size() << " in '" << line << "'");
    CpuTimes t;
    t.busy_s = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ticks_per_s;
    t.total_s = t.busy_s + (v[3] + v[4]) / ticks_per_s;
    return t;
  }
  AGENTR1_CHECK(false, "/proc/stat: no 'cpu ' line (the machine-wide counters) in its "
                           << text.size() << " bytes");
  return {};
}

int threads_for(int cores, double others_busy_cores, int max) {
  const double free = static_cast<double>(cores) - std::max(0.0, others_busy_cores);
  const int n = static_cast<int>(std::floor(free + 0.25));
  return std::clamp(n, 1, std::max(1, max));
}

FreeCores::FreeCores(int cores)
    : cores_(cores > 0 ? cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  const auto t = read_proc_stat();
  ok_ = t.has_value();
  if (ok_) {
    wall0_ = wall_s();
    busy0_ = t->busy_s;
    self0_ = self_cpu_s();
  }
}

std::optional<double> FreeCores::others_busy() {
  if (!ok_) return std::nullopt;
  const double wall = wall_s();
  if (wall - wall0_ < 0.05) return last_;  // too short for 10 ms ticks to say anything
  const auto t = read_proc_stat();
  if (!t) return last_;
  const double self = self_cpu_s();
  const double others = ((t->busy_s - busy0_) - (self - self0_)) / (wall - wall0_);
  wall0_ = wall;
  busy0_ = t->busy_s;
  self0_ = self;
  last_ = std::clamp(others, 0.0, static_cast<double>(cores_));
  return last_;
}

int FreeCores::threads(int max) {
  const auto o = others_busy();
  return o ? threads_for(cores_, *o, max) : std::max(1, max);
}

}  // namespace agentr1::core
