#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agentr1/core/error.h"

extern char** environ;

namespace agentr1::cli {
namespace {

// The children, for the signal handler (async-signal-safe: a fixed array and kill()).
pid_t g_children[kMaxChildren];
volatile sig_atomic_t g_n_children = 0;  // slots in use (a forgotten child's slot holds 0)
volatile sig_atomic_t g_signalled = 0;

void forward_signal(int sig) {
  g_signalled = 1;
  for (int i = 0; i < g_n_children; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

}  // namespace

std::string self_exe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  AGENTR1_CHECK(n > 0, "cannot find this program's path (/proc/self/exe): " << std::strerror(errno));
  self[n] = '\0';
  return self;
}

std::vector<std::string> environment_without(const std::vector<std::string>& drop) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool dropped = false;
    for (const auto& d : drop) dropped = dropped || d == key;
    if (!dropped) out.push_back(kv);
  }
  return out;
}

void forward_stop_signals() {
  struct sigaction sa{};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_signalled() { return g_signalled != 0; }

pid_t spawn_child(const std::string& program, const std::vector<std::string>& argv_in,
                  const std::vector<std::string>& env_in, const std::string& log_file) {
  // Everything the child touches is built before fork (it only calls exec-safe functions).
  std::vector<std::string> argv_s = argv_in, env_s = env_in;
  std::vector<char*> argv, envp;
  for (auto& w : argv_s) argv.push_back(w.data());
  argv.push_back(nullptr);
  for (auto& kv : env_s) envp.push_back(kv.data());
  envp.push_back(nullptr);
  int log_fd = -1;
  if (!log_file.empty()) {
    log_fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    AGENTR1_CHECK(log_fd >= 0, "cannot open the log file '" << log_file << "' for a child process: "
                                                            << std::strerror(errno));
  }
  int slot = -1;
  for (int i = 0; i < g_n_children && slot < 0; ++i)
    if (g_children[i] == 0) slot = i;
  if (slot < 0 && g_n_children < kMaxChildren) slot = g_n_children;
  if (slot < 0 && log_fd >= 0) close(log_fd);
  AGENTR1_CHECK(slot >= 0, "more than " << kMaxChildren << " child processes at once");
  const pid_t parent = getpid();
  // Signals wait until the child is recorded (a handler running in the child between
  // fork and exec would signal its siblings with a stale list).
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    // Its own process group: a terminal's Ctrl-C reaches the parent only, which forwards
    // it once (twice would be "press Ctrl-C again to quit now" for a training run).
    setpgid(0, 0);
    // And it goes when the parent goes, even if that one is killed with SIGKILL.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(143);
    if (log_fd >= 0) {
      dup2(log_fd, 1);
      dup2(log_fd, 2);
    }
    if (program.find('/') != std::string::npos) execve(program.c_str(), argv.data(), envp.data());
    else execvpe(program.c_str(), argv.data(), envp.data());
    const char msg[] = "agentr1: cannot run the child command (exec failed)\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) {
    g_children[slot] = pid;
    if (slot == g_n_children) g_n_children = slot + 1;
  }
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (log_fd >= 0) close(log_fd);
  AGENTR1_CHECK(pid >= 0, "fork(): " << std::strerror(fork_errno));
  return pid;
}

void forget_child(pid_t pid) {
  for (int i = 0; i < g_n_children; ++i)
    if (g_children[i] == pid) g_children[i] = 0;
}

void signal_children(int sig) {
  for (int i = 0; i < g_n_children; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped (status " + std::to_string(status) + ")";
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace agentr1::cli
