// core/cpu_load: /proc/stat parsing on fixed texts, the threads rule, and a live window
// with a busy child process (the bound asserted is loose: the child must be seen using
// some CPU, which holds however loaded the machine is, since it spins the whole window).
#include "agentr1/core/cpu_load.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agentr1/core/error.h"

namespace agentr1::core {
namespace {

TEST(ParseProcStat, SumsTheBusyAndIdleCounters) {
  // Two cores' aggregate line as Linux prints it (10 counters), then per-core lines.
  const std::string text =
      "cpu  100 20 30 400 50 6 7 8 90 0\n"
      "cpu0 50 10 15 200 25 3 3 4 45 0\n"
      "cpu1 50 10 15 200 25 3 4 4 45 0\n"
      "intr 12345\n";
  const CpuTimes t = parse_proc_stat(text, 100.0);
  EXPECT_DOUBLE_EQ(t.busy_s, (100 + 20 + 30 + 6 + 7 + 8) / 100.0);  // guest (90) is inside user
  EXPECT_DOUBLE_EQ(t.total_s, (100 + 20 + 30 + 6 + 7 + 8 + 400 + 50) / 100.0);
}

TEST(ParseProcStat, RejectsMissingOrShortLinesNamingThem) {
  try {
    parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n", 100.0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'cpu ' line"), std::string::npos) << e.what();
  }
  try {
    parse_proc_stat("cpu  1 2 3 4\n", 100.0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got 4"), std::string::npos) << e.what();
  }
}

TEST(ThreadsFor, LeavesTheCoresOthersUse) {
  EXPECT_EQ(threads_for(2, 0.0, 2), 2);
  EXPECT_EQ(threads_for(2, 0.2, 2), 2);   // a quarter of a core taken: still free
  EXPECT_EQ(threads_for(2, 0.3, 2), 1);
  EXPECT_EQ(threads_for(2, 1.0, 2), 1);   // one busy-loop process
  EXPECT_EQ(threads_for(2, 2.0, 2), 1);   // never below one
  EXPECT_EQ(threads_for(8, 1.0, 8), 7);
  EXPECT_EQ(threads_for(8, 0.0, 4), 4);   // never above max
  EXPECT_EQ(threads_for(2, -1.0, 2), 2);  // a negative estimate counts as none
}

TEST(FreeCores, SeesABusyChildProcess) {
  FreeCores fc;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;  // killed below
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto others = fc.others_busy();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (!others) GTEST_SKIP() << "no /proc/stat on this system: nothing to measure";
  // The child spun the whole 400 ms window; even sharing a core three ways it ran a
  // sixth of it. (This process slept, so its own time is not in "others".)
  EXPECT_GE(*others, 0.15);
  EXPECT_LE(*others, static_cast<double>(fc.cores()));
  EXPECT_LE(fc.threads(fc.cores()), fc.cores());
  EXPECT_GE(fc.threads(fc.cores()), 1);
}

}  // namespace
}  // namespace agentr1::core
