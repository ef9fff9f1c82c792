#include "stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace agentr1::cli {
namespace {

std::atomic<int> g_stop{0};

extern "C" void on_stop_signal(int sig) {
  g_stop.store(sig);
  // Async-signal-safe: write(2) and signal(2) only.
  const char* msg =
      "\nagentr1: stopping after this step (a checkpoint will be written); press Ctrl-C again to quit now\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
  (void)ignored;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace

const std::atomic<int>* install_stop_signals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  return &g_stop;
}

int stop_exit_code() {
  const int sig = g_stop.load();
  return sig > 0 ? 128 + sig : 1;
}

}  // namespace agentr1::cli
