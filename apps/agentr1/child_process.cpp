#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <cstring>

#include "agentr1/core/error.h"

extern char** environ;

namespace agentr1::cli {
namespace {

// The children, for the signal handler (async-signal-safe: lock-free atomics and kill();
// the handler may run on any thread, while another one registers a child).
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<int> g_n_children{0};  // slots in use (a forgotten child's slot holds 0)
volatile sig_atomic_t g_signal = 0;  // the last stop signal received, 0 = none
struct sigaction g_old_int, g_old_term;
bool g_installed = false;

void forward_signal(int sig) {
  g_signal = sig;
  const int n = g_n_children.load();
  for (int i = 0; i < n; ++i) {
    const pid_t pid = g_children[i].load();
    if (pid > 0) kill(pid, sig);
  }
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
  if (!g_installed) {
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
  } else {
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }
  g_installed = true;
  // waitpid must see the children exit (an inherited SIG_IGN would reap them itself).
  signal(SIGCHLD, SIG_DFL);
}

void restore_stop_signals() {
  if (!g_installed) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
}

bool stop_signalled() { return g_signal != 0; }
int stop_signal() { return g_signal; }

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
  // Said by the child if exec fails (built here: the child may only call exec-safe functions).
  const std::string exec_failed = "agentr1: cannot run '" + program + "' (exec failed: errno ";
  int slot = -1;
  const int used = g_n_children.load();
  for (int i = 0; i < used && slot < 0; ++i)
    if (g_children[i].load() == 0) slot = i;
  if (slot < 0 && used < kMaxChildren) slot = used;
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
    const int e = errno;
    char digits[16];
    int n = 0;
    for (int v = e; n < 15 && (v > 0 || n == 0); v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    (void)!write(2, exec_failed.data(), exec_failed.size());
    while (n > 0) (void)!write(2, &digits[--n], 1);
    (void)!write(2, ")\n", 2);
    _exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) {
    g_children[slot].store(pid);
    if (slot == g_n_children.load()) g_n_children.store(slot + 1);
  }
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  // A stop that another thread handled between fork and the line above missed this child.
  if (pid > 0 && g_signal != 0) kill(pid, g_signal);
  if (log_fd >= 0) close(log_fd);
  AGENTR1_CHECK(pid >= 0, "fork(): " << std::strerror(fork_errno));
  return pid;
}

void forget_child(pid_t pid) {
  const int n = g_n_children.load();
  for (int i = 0; i < n; ++i)
    if (g_children[i].load() == pid) g_children[i].store(0);
}

void signal_children(int sig) {
  const int n = g_n_children.load();
  for (int i = 0; i < n; ++i) {
    const pid_t pid = g_children[i].load();
    if (pid > 0) kill(pid, sig);
  }
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
