// agentr1/core/cpu_load.h — how many cores the rest of the machine leaves us, so that
// thread teams can be sized to them.
//
//   core::FreeCores free;                  // starts a measuring window
//   ... one training step ...
//   int n = free.threads(/*max=*/2);       // 1 while another process keeps a core busy
//
// Why: teams of spinning threads (OpenMP's, the engine's SpinPool) assume a core each.
// When another process holds one of them, a team member is descheduled for whole time
// slices while its partners spin at a barrier waiting for it: on 2 cores one busy-loop
// process beside the built-in default job made its steps 10-14x slower, where giving up
// the core costs at most 2x. Measuring what the others use and running on the cores
// left avoids that.
//
// How: over the window since the previous call, the machine's busy time (/proc/stat's
// first line: user, nice, system, irq, softirq, steal; steal is time a hypervisor gave
// away, lost to us as well) minus this process's own CPU time (getrusage) is what the
// others used; divided by the window's length, in cores. Linux only; elsewhere (or when
// /proc/stat is unreadable) nothing is measured and threads() returns max.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace agentr1::core {

// The machine's cumulative CPU time, all cores together, in seconds.
struct CpuTimes {
  double busy_s = 0;   // user + nice + system + irq + softirq + steal
  double total_s = 0;  // busy + idle + iowait
};

// Parses /proc/stat's text (its "cpu " line; ticks of `ticks_per_s`). Throws Error naming
// the problem when the line is missing or malformed.
CpuTimes parse_proc_stat(const std::string& text, double ticks_per_s);

// Threads for a team given the cores the others use: the cores left, a core counted as
// free when at most a quarter of it is taken, clamped to [1, max].
int threads_for(int cores, double others_busy_cores, int max);

class FreeCores {
 public:
  // cores: the machine's (0 = std::thread::hardware_concurrency()).
  explicit FreeCores(int cores = 0);
  // The cores other processes kept busy on average since the previous call (or since
  // construction), or nullopt where it cannot be measured (no /proc/stat, a window
  // under 50 ms: the previous measurement is returned then).
  std::optional<double> others_busy();
  // threads_for(cores, others_busy(), max); max where nothing could be measured.
  int threads(int max);
  int cores() const { return cores_; }

 private:
  int cores_;
  bool ok_ = false;
  double wall0_ = 0, busy0_ = 0, self0_ = 0;
  std::optional<double> last_;
};

}  // namespace agentr1::core
