#include "agentr1/env/sandbox.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "agentr1/core/log.h"

// glibc's <sys/mount.h> conflicts with <linux/mount.h>; declare the two calls we need.
extern "C" int mount(const char* source, const char* target, const char* fstype,
                     unsigned long flags, const void* data) noexcept;
#ifndef MS_RDONLY
#define MS_RDONLY 1
#define MS_NOSUID 2
#define MS_NODEV 4
#define MS_NOEXEC 8
#define MS_REMOUNT 32
#define MS_BIND 4096
#define MS_REC 16384
#define MS_PRIVATE (1 << 18)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#define SECBIT_NO_CAP_AMBIENT_RAISE (1 << 6)
#define SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1 << 7)
#endif

namespace agentr1::env {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------
// Everything the child needs, prepared by the parent before clone(): between clone()
// and execve() the child only makes system calls and reads this (no allocation, no
// locks: another thread of the parent may have held any lock at clone time).
struct ChildPlan {
  // pipe ends the child uses (parent's numbers)
  int stdin_r = -1, stdout_w = -1, stderr_w = -1, control_w = -1;
  int status_w = -1;   // the init writes the command's wait status here
  int setup_w = -1;    // setup errors and warnings; closes (EOF) at execve
  int sync_r = -1;     // the parent writes one byte once the id maps are written
  bool root_caller = false;
  const char* scratch = nullptr;
  std::vector<const char*> scratch_parents;  // "/a", "/a/b", ... the scratch dir itself last
  std::vector<const char*> hide;             // existing directories to cover
  const char* tmp_data = nullptr;            // tmpfs options of /tmp and /dev/shm
  bool has_dev_shm = false;
  const char* exe = nullptr;
  std::vector<char*> argv;   // null-terminated
  std::vector<char*> envp;   // null-terminated
  rlim_t cpu_soft = 0, cpu_hard = 0, as = 0, nproc = 0, fsize = 0, nofile = 0;
};

// Async-signal-safe setup report: "<kind><step>\t<errno>\n" in one write (< PIPE_BUF,
// so records from the init and the command never interleave).
void child_report(int fd, char kind, const char* step, const char* arg, int err) {
  char buf[512];
  size_t n = 0;
  auto put = [&](const char* s) {
    while (s && *s && n < sizeof(buf) - 16) buf[n++] = *s++;
  };
  buf[n++] = kind;
  put(step);
  if (arg) {
    put(" ");
    put(arg);
  }
  buf[n++] = '\t';
  char digits[16];
  int k = 0;
  unsigned v = static_cast<unsigned>(err);
  do {
    digits[k++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && k < 15);
  while (k) buf[n++] = digits[--k];
  buf[n++] = '\n';
  ssize_t w = ::write(fd, buf, n);
  (void)w;
}

[[noreturn]] void child_fail(const ChildPlan& p, const char* step, const char* arg) {
  child_report(p.setup_w, 'E', step, arg, errno);
  _exit(127);
}

// Closes every descriptor except `keep` (unsorted, -1 entries ignored).
void close_all_but(int* keep, int n) {
  for (int i = 1; i < n; ++i) {  // insertion sort; n is tiny
    int v = keep[i], j = i - 1;
    while (j >= 0 && keep[j] > v) {
      keep[j + 1] = keep[j];
      --j;
    }
    keep[j + 1] = v;
  }
  unsigned next = 0;
  for (int i = 0; i < n; ++i) {
    if (keep[i] < 0) continue;
    unsigned k = static_cast<unsigned>(keep[i]);
    if (k > next) syscall(SYS_close_range, next, k - 1, 0);
    next = k + 1;
  }
  syscall(SYS_close_range, next, ~0U, 0);
}

// Moves `fd` to `target` (dup2; the copy is not close-on-exec).
void place_fd(const ChildPlan& p, int fd, int target) {
  if (fd == target) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0) child_fail(p, "fcntl", nullptr);
    return;
  }
  if (dup2(fd, target) < 0) child_fail(p, "dup2", nullptr);
}

// The command, in the sandbox's PID namespace as the init's child.
[[noreturn]] void command_main(ChildPlan& p) {
  // Lift every fd we need above the 0..3 targets first, so dup2 never clobbers one.
  int hi[5] = {p.stdin_r, p.stdout_w, p.stderr_w, p.control_w, p.setup_w};
  for (int& fd : hi) {
    if (fd < 0) continue;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 64);
    if (moved < 0) child_fail(p, "fcntl(F_DUPFD)", nullptr);
    fd = moved;
  }
  p.setup_w = hi[4];
  place_fd(p, hi[0], 0);
  place_fd(p, hi[1], 1);
  place_fd(p, hi[2], 2);
  int first_free = 3;
  if (hi[3] >= 0) {
    place_fd(p, hi[3], 3);
    first_free = 4;
  }
  // Everything else closes at execve (the setup pipe too: that EOF tells the parent).
  syscall(SYS_close_range, static_cast<unsigned>(first_free), ~0U, CLOSE_RANGE_CLOEXEC);

  struct Limit {
    int resource;
    rlim_t soft, hard;
    const char* name;
  } limits[] = {
      {RLIMIT_CPU, p.cpu_soft, p.cpu_hard, "setrlimit(RLIMIT_CPU)"},
      {RLIMIT_AS, p.as, p.as, "setrlimit(RLIMIT_AS)"},
      {RLIMIT_NPROC, p.nproc, p.nproc, "setrlimit(RLIMIT_NPROC)"},
      {RLIMIT_FSIZE, p.fsize, p.fsize, "setrlimit(RLIMIT_FSIZE)"},
      {RLIMIT_NOFILE, p.nofile, p.nofile, "setrlimit(RLIMIT_NOFILE)"},
      {RLIMIT_CORE, 0, 0, "setrlimit(RLIMIT_CORE)"},
  };
  for (const Limit& l : limits) {
    struct rlimit r{l.soft, l.hard};
    if (setrlimit(l.resource, &r) != 0) child_fail(p, l.name, nullptr);
  }
  if (chdir(p.scratch) != 0) child_fail(p, "chdir", p.scratch);

  // No capabilities, now or after execve (uid 0 inside must not regain them), and no
  // way to gain privileges (setuid bits, file capabilities).
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE |
                                   SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
            0, 0, 0) != 0) {
    child_fail(p, "prctl(PR_SET_SECUREBITS)", nullptr);
  }
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      child_fail(p, "prctl(PR_CAPBSET_DROP)", nullptr);
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &hdr, data) != 0) child_fail(p, "capset", nullptr);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(p, "prctl(PR_SET_NO_NEW_PRIVS)", nullptr);

  execve(p.exe, p.argv.data(), p.envp.data());
  child_fail(p, "execve", p.exe);
}

// The sandbox's init (pid 1 of the new PID namespace, root of the new user namespace).
[[noreturn]] void init_main(ChildPlan& p) {
  int keep[] = {p.stdin_r, p.stdout_w, p.stderr_w, p.control_w,
                p.status_w, p.setup_w, p.sync_r};
  // Drops descriptors of other sandboxes started concurrently by other threads: a copy of
  // their pipes here would keep them from seeing EOF.
  close_all_but(keep, static_cast<int>(sizeof(keep) / sizeof(keep[0])));
  setpgid(0, 0);
  char go = 0;
  ssize_t got;
  do {
    got = ::read(p.sync_r, &go, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) _exit(126);  // the parent gave up before writing the id maps
  close(p.sync_r);

  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    child_fail(p, "mount(MS_REC|MS_PRIVATE) of", "/");
  }
  // A detached copy of the scratch directory, taken while we still have the caller's
  // host uid (so the path's parents need not be searchable by the sandbox's uid).
  int tree = static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, p.scratch,
                                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (tree < 0) child_fail(p, "open_tree(OPEN_TREE_CLONE)", p.scratch);

  // Become the mapped ids (uid/gid 0 inside = the sandbox's host ids); the capabilities
  // in the new user namespace stay until the command drops them.
  // Raw system calls: glibc's wrappers would signal the parent's other threads (its
  // setxid broadcast), which do not exist in this copy, and wait forever.
  if (syscall(SYS_setresgid, 0, 0, 0) != 0) child_fail(p, "setresgid", nullptr);
  if (p.root_caller && syscall(SYS_setgroups, 0, nullptr) != 0) child_fail(p, "setgroups", nullptr);
  if (syscall(SYS_setresuid, 0, 0, 0) != 0) child_fail(p, "setresuid", nullptr);

  struct mount_attr ro{};
  ro.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
  if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) != 0) {
    child_fail(p, "mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY) of", "/");
  }
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_data) != 0) {
    child_fail(p, "mount tmpfs on", "/tmp");
  }
  if (p.has_dev_shm &&
      mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_data) != 0) {
    child_fail(p, "mount tmpfs on", "/dev/shm");
  }
  for (const char* h : p.hide) {
    if (mount("tmpfs", h, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,mode=755") != 0) {
      child_fail(p, "mount tmpfs over hidden path", h);
    }
  }
  // The scratch path may now lie on one of those tmpfs: recreate it there.
  for (const char* dir : p.scratch_parents) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) child_fail(p, "mkdir", dir);
  }
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, p.scratch, MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    child_fail(p, "move_mount of the scratch directory onto", p.scratch);
  }
  close(tree);
  struct mount_attr rw{};
  rw.attr_clr = MOUNT_ATTR_RDONLY;
  rw.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (syscall(SYS_mount_setattr, AT_FDCWD, p.scratch, 0, &rw, sizeof rw) != 0) {
    child_fail(p, "mount_setattr(read-write) of", p.scratch);
  }
  for (const char* h : p.hide) {
    if (syscall(SYS_mount_setattr, AT_FDCWD, h, 0, &ro, sizeof ro) != 0) {
      child_fail(p, "mount_setattr(MOUNT_ATTR_RDONLY) of", h);
    }
  }
  // A /proc of the new PID namespace (shows only the sandbox's processes). Kernels refuse
  // it where the host's /proc is partly masked (some container runtimes): then the host's
  // stays, read-only, and the parent logs a warning.
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    child_report(p.setup_w, 'W', "mount proc on", "/proc", errno);
  }
  sethostname("sandbox", 7);

  long cmd = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (cmd < 0) child_fail(p, "clone of the command", nullptr);
  if (cmd == 0) command_main(p);
  // The init keeps only the status pipe: the parent sees EOF on the others once the
  // command (and whatever it started) is gone.
  close(p.stdin_r);
  close(p.stdout_w);
  close(p.stderr_w);
  if (p.control_w >= 0) close(p.control_w);
  close(p.setup_w);
  for (;;) {
    int st = 0;
    pid_t w = waitpid(-1, &st, 0);
    if (w == static_cast<pid_t>(cmd)) {
      ssize_t n = ::write(p.status_w, &st, sizeof st);
      (void)n;
      _exit(0);  // the kernel kills whatever else is left in the namespace
    }
    if (w < 0 && errno != EINTR) _exit(125);
  }
}

// ---------------------------------------------------------------------------------
// Parent side.

struct Pipe {
  int r = -1, w = -1;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw SandboxError(std::string("sandbox: pipe2 failed: ") + std::strerror(errno));
  }
  return {fds[0], fds[1]};
}

void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Writes the whole string to a /proc file (uid_map, gid_map, setgroups).
std::string write_proc_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return "open " + path + ": " + std::strerror(errno);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return "writing '" + text.substr(0, text.size() - 1) + "' to " + path + ": " +
           std::strerror(n < 0 ? err : EIO);
  }
  return "";
}

// write() that turns a reader gone away into EPIPE without a process-wide SIGPIPE.
ssize_t write_no_sigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  ssize_t w = ::write(fd, data, n);
  int err = errno;
  if (w < 0 && err == EPIPE && !was_pending) {
    struct timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = err;
  return w;
}

std::string clone_hint(int err) {
  if (err == EPERM || err == ENOSPC || err == EINVAL) {
    return " (HINT: the kernel refused to create user namespaces. Enable them: sysctl "
           "user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 on "
           "Debian/Ubuntu kernels that have it, kernel.apparmor_restrict_unprivileged_userns=0 "
           "on Ubuntu 24.04); in Docker run with --security-opt seccomp=unconfined or a "
           "profile that allows clone/unshare with CLONE_NEWUSER. Check with "
           "`unshare -Urn true`.)";
  }
  return "";
}

// Parses the setup pipe's records into messages; returns the first error ("" if none).
std::string parse_setup(const std::string& bytes, std::vector<std::string>* warnings) {
  std::string error;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    std::string rec = bytes.substr(pos, end - pos);
    pos = end + 1;
    if (rec.size() < 2) continue;
    size_t tab = rec.find('\t');
    std::string step = rec.substr(1, tab == std::string::npos ? std::string::npos : tab - 1);
    int err = tab == std::string::npos ? 0 : std::atoi(rec.c_str() + tab + 1);
    std::string msg = step + ": " + std::strerror(err);
    if (rec[0] == 'E' && error.empty()) {
      error = msg;
      if (step.rfind("execve", 0) == 0 && err == ENOENT) {
        error += " (the program does not exist; give an absolute path to an installed binary)";
      } else if (step.rfind("chdir", 0) == 0 && err == EACCES) {
        error += " (the sandbox's host uid cannot reach the scratch directory: its parent "
                 "directories must be searchable by others, o+x)";
      }
    } else if (rec[0] == 'W') {
      warnings->push_back(msg);
    }
  }
  return error;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

// ---------------------------------------------------------------------------------

void SandboxOptions::validate() const {
  AGENTR1_CHECK(!scratch_dir.empty() && scratch_dir[0] == '/',
                "sandbox scratch_dir must be an absolute path, got '" << scratch_dir << "'");
  AGENTR1_CHECK(timeout_s > 0, "sandbox timeout_s must be > 0, got " << timeout_s);
  AGENTR1_CHECK(start_timeout_s > 0, "sandbox start_timeout_s must be > 0, got " << start_timeout_s);
  AGENTR1_CHECK(cpu_s >= 1, "sandbox cpu_s must be >= 1, got " << cpu_s);
  AGENTR1_CHECK(cpu_hard_s == 0 || cpu_hard_s >= cpu_s,
                "sandbox cpu_hard_s must be 0 (= cpu_s + 1) or >= cpu_s (" << cpu_s << "), got "
                                                                            << cpu_hard_s);
  AGENTR1_CHECK(memory_mb >= 16, "sandbox memory_mb must be >= 16, got " << memory_mb);
  AGENTR1_CHECK(max_processes >= 2, "sandbox max_processes must be >= 2, got " << max_processes);
  AGENTR1_CHECK(max_file_mb >= 1, "sandbox max_file_mb must be >= 1, got " << max_file_mb);
  AGENTR1_CHECK(max_open_files >= 16, "sandbox max_open_files must be >= 16, got " << max_open_files);
  AGENTR1_CHECK(max_output_bytes >= 1, "sandbox max_output_bytes must be >= 1, got 0");
  for (const std::string& h : hide_paths) {
    AGENTR1_CHECK(!h.empty() && h[0] == '/' && h != "/",
                  "sandbox hide_paths entries must be absolute directories other than /, got '"
                      << h << "'");
  }
}

std::unique_ptr<SandboxProcess> SandboxProcess::start(const std::vector<std::string>& argv,
                                                      const std::vector<std::string>& env,
                                                      const SandboxOptions& o,
                                                      bool control_channel) {
  o.validate();
  AGENTR1_CHECK(!argv.empty() && !argv[0].empty() && argv[0][0] == '/',
                "sandbox: argv[0] must be an absolute path, got '"
                    << (argv.empty() ? std::string() : argv[0]) << "'");
  struct stat st{};
  if (::stat(o.scratch_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw SandboxError("sandbox: scratch_dir '" + o.scratch_dir + "' is not a directory");
  }

  // Everything the child reads, as C strings that outlive the clone.
  std::string scratch = o.scratch_dir;
  while (scratch.size() > 1 && scratch.back() == '/') scratch.pop_back();
  std::vector<std::string> parents;
  for (size_t i = 1; i <= scratch.size(); ++i) {
    if (i == scratch.size() || scratch[i] == '/') parents.push_back(scratch.substr(0, i));
  }
  std::vector<std::string> hide;
  for (const std::string& h : o.hide_paths) {
    struct stat hs{};
    if (::stat(h.c_str(), &hs) == 0 && S_ISDIR(hs.st_mode)) hide.push_back(h);
  }
  std::sort(hide.begin(), hide.end());  // parents before children
  std::string tmp_data = "size=" + std::to_string(o.max_file_mb) + "m,mode=1777";
  std::vector<std::string> argv_s = argv, env_s = env;

  ChildPlan plan;
  plan.root_caller = geteuid() == 0;
  plan.scratch = scratch.c_str();
  for (const auto& s : parents) plan.scratch_parents.push_back(s.c_str());
  for (const auto& s : hide) plan.hide.push_back(s.c_str());
  plan.tmp_data = tmp_data.c_str();
  struct stat shm{};
  plan.has_dev_shm = ::stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode);
  plan.exe = argv_s[0].c_str();
  for (auto& a : argv_s) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (auto& e : env_s) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);
  plan.cpu_soft = static_cast<rlim_t>(o.cpu_s);
  plan.cpu_hard = static_cast<rlim_t>(o.cpu_hard_s > 0 ? o.cpu_hard_s : o.cpu_s + 1);
  plan.as = static_cast<rlim_t>(o.memory_mb) << 20;
  plan.nproc = static_cast<rlim_t>(o.max_processes);
  plan.fsize = static_cast<rlim_t>(o.max_file_mb) << 20;
  plan.nofile = static_cast<rlim_t>(o.max_open_files);

  std::vector<int> to_close;  // every fd made here, closed on every path out
  auto adopt = [&](Pipe p) {
    to_close.push_back(p.r);
    to_close.push_back(p.w);
    return p;
  };
  auto close_all = [&] {
    for (int& fd : to_close) close_fd(fd);
  };
  std::unique_ptr<SandboxProcess> proc(new SandboxProcess());
  proc->max_output_bytes_ = o.max_output_bytes;
  try {
    Pipe in = adopt(make_pipe()), out = adopt(make_pipe()), err = adopt(make_pipe());
    Pipe status = adopt(make_pipe()), setup = adopt(make_pipe()), sync = adopt(make_pipe());
    Pipe control;
    if (control_channel) control = adopt(make_pipe());
    plan.stdin_r = in.r;
    plan.stdout_w = out.w;
    plan.stderr_w = err.w;
    plan.control_w = control.w;
    plan.status_w = status.w;
    plan.setup_w = setup.w;
    plan.sync_r = sync.r;

    long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
    if (!o.network) flags |= CLONE_NEWNET;
    long pid = syscall(SYS_clone, flags, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) init_main(plan);
    if (pid < 0) {
      int e = errno;
      close_all();
      throw SandboxError(std::string("sandbox: clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID") +
                         (o.network ? "" : "|CLONE_NEWNET") + ") failed: " + std::strerror(e) +
                         clone_hint(e));
    }
    proc->pid_ = static_cast<pid_t>(pid);
    setpgid(proc->pid_, proc->pid_);  // the init does it too; whichever runs first wins
    // Our copies of the child's ends go now (EOF on the parent's ends depends on it).
    for (int* fd : {&in.r, &out.w, &err.w, &control.w, &status.w, &setup.w, &sync.r}) {
      if (*fd < 0) continue;
      std::replace(to_close.begin(), to_close.end(), *fd, -1);
      close_fd(*fd);
    }
    // Parent-held ends from here on belong to proc (closed by its destructor/kill).
    proc->stdin_fd_ = in.w;
    proc->stdout_fd_ = out.r;
    proc->stderr_fd_ = err.r;
    proc->control_fd_ = control.r;
    proc->status_fd_ = status.r;
    for (int fd : {in.w, out.r, err.r, control.r, status.r}) {
      std::replace(to_close.begin(), to_close.end(), fd, -1);
      if (fd >= 0) set_nonblocking(fd);
    }

    // The id maps: written by us, from outside (a process cannot map ids other than its
    // own from inside a new user namespace).
    std::string dir = "/proc/" + std::to_string(pid) + "/";
    std::string map_error;
    if (plan.root_caller) {
      map_error = write_proc_file(dir + "uid_map", "0 " + std::to_string(o.uid) + " 1\n");
      if (map_error.empty()) {
        map_error = write_proc_file(dir + "gid_map", "0 " + std::to_string(o.gid) + " 1\n");
      }
    } else {
      map_error = write_proc_file(dir + "setgroups", "deny\n");
      if (map_error.empty()) {
        map_error = write_proc_file(dir + "uid_map", "0 " + std::to_string(geteuid()) + " 1\n");
      }
      if (map_error.empty()) {
        map_error = write_proc_file(dir + "gid_map", "0 " + std::to_string(getegid()) + " 1\n");
      }
    }
    if (!map_error.empty()) {
      close_all();
      proc->kill();
      throw SandboxError("sandbox: could not set up the user namespace's id maps: " + map_error);
    }
    ssize_t w = write_no_sigpipe(sync.w, "g", 1);
    (void)w;
    std::replace(to_close.begin(), to_close.end(), sync.w, -1);
    close_fd(sync.w);

    // Wait for the setup pipe's EOF: the command exec'ed (or something failed).
    std::string setup_bytes;
    auto t0 = Clock::now();
    bool eof = false;
    while (!eof) {
      double left = o.start_timeout_s - seconds_since(t0);
      if (left <= 0) break;
      struct pollfd pfd{setup.r, POLLIN, 0};
      int r = poll(&pfd, 1, static_cast<int>(left * 1000) + 1);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char buf[1024];
      ssize_t n = ::read(setup.r, buf, sizeof buf);
      if (n > 0) {
        setup_bytes.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        eof = true;
      }
    }
    close_all();
    std::vector<std::string> warnings;
    std::string error = parse_setup(setup_bytes, &warnings);
    for (const std::string& wmsg : warnings) {
      static std::once_flag once;  // the same on every start: say it once per process
      std::call_once(once, [&] { AGENTR1_LOG(WARN) << "sandbox: " << wmsg; });
    }
    if (!eof && error.empty()) {
      error = "setting up the sandbox took longer than start_timeout_s (" +
              std::to_string(o.start_timeout_s) + " s)";
    }
    if (!error.empty()) {
      proc->kill();
      throw SandboxError("sandbox: " + error);
    }
  } catch (...) {
    close_all();
    throw;  // proc's destructor kills and reaps a started child
  }
  return proc;
}

SandboxProcess::~SandboxProcess() { kill(); }

void SandboxProcess::kill() {
  if (pid_ > 0 && !reaped_) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    reap(/*blocking=*/true);
  }
  for (int* fd : {&stdin_fd_, &stdout_fd_, &stderr_fd_, &control_fd_, &status_fd_}) close_fd(*fd);
}

void SandboxProcess::reap(bool blocking) {
  if (pid_ <= 0 || reaped_) return;
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid_, &st, blocking ? 0 : WNOHANG);
    if (w < 0 && errno == EINTR) continue;
    if (w == pid_ || w < 0) reaped_ = true;  // w < 0: ECHILD, someone else reaped it
    return;
  }
}

void SandboxProcess::finish_status(SandboxExchange& x) {
  x.exited = true;
  if (status_bytes_.size() >= sizeof(int)) {
    int st = 0;
    std::memcpy(&st, status_bytes_.data(), sizeof st);
    if (WIFEXITED(st)) {
      x.exit_code = WEXITSTATUS(st);
      x.signal = 0;
    } else if (WIFSIGNALED(st)) {
      x.exit_code = -1;
      x.signal = WTERMSIG(st);
    }
  } else {
    x.exit_code = -1;
    x.signal = SIGKILL;  // the init died without a report: it was killed
  }
}

SandboxExchange SandboxProcess::exchange(const std::string& input, double timeout_s,
                                         bool close_stdin) {
  SandboxExchange x;
  auto t0 = Clock::now();
  if (reaped_ || status_fd_ < 0) {
    finish_status(x);
    return x;
  }
  size_t written = 0;
  std::vector<char> buf(65536);
  // Reads what is there on one output pipe; false at EOF (the fd is then closed).
  auto read_into = [&](int& fd, std::string& keep, size_t& total) {
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n > 0) {
        total += static_cast<size_t>(n);
        if (keep.size() < max_output_bytes_) {
          keep.append(buf.data(), std::min(static_cast<size_t>(n), max_output_bytes_ - keep.size()));
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      close_fd(fd);
      return false;
    }
  };
  // Appends what is there on a non-blocking fd; closes it at EOF or on an error.
  auto read_all = [&](int& fd, std::string& into) {
    for (;;) {
      ssize_t k = ::read(fd, buf.data(), buf.size());
      if (k > 0) {
        into.append(buf.data(), static_cast<size_t>(k));
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k == 0 || errno != EAGAIN) close_fd(fd);
      return;
    }
  };
  // After the command ended: the rest of its output (the writers are gone or going).
  auto drain_until_eof = [&](double limit_s) {
    auto d0 = Clock::now();
    while ((stdout_fd_ >= 0 || stderr_fd_ >= 0) && seconds_since(d0) < limit_s) {
      struct pollfd p[2] = {{stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}};
      int r = poll(p, 2, 100);
      if (r < 0 && errno != EINTR) break;
      if (stdout_fd_ >= 0) read_into(stdout_fd_, x.stdout_text, x.stdout_bytes);
      if (stderr_fd_ >= 0) read_into(stderr_fd_, x.stderr_text, x.stderr_bytes);
    }
  };

  for (;;) {
    if (stdin_fd_ >= 0 && written == input.size() && close_stdin) close_fd(stdin_fd_);
    double left = timeout_s - seconds_since(t0);
    if (left <= 0) {
      x.timed_out = true;
      kill();
      // kill() closed the pipes; what was read so far is kept.
      x.exited = true;
      x.exit_code = -1;
      x.signal = SIGKILL;
      break;
    }
    struct pollfd p[5];
    int n = 0;
    int i_in = -1, i_out = -1, i_err = -1, i_ctl = -1, i_st = -1;
    if (stdin_fd_ >= 0 && written < input.size()) {
      i_in = n;
      p[n++] = {stdin_fd_, POLLOUT, 0};
    }
    if (stdout_fd_ >= 0) {
      i_out = n;
      p[n++] = {stdout_fd_, POLLIN, 0};
    }
    if (stderr_fd_ >= 0) {
      i_err = n;
      p[n++] = {stderr_fd_, POLLIN, 0};
    }
    if (control_fd_ >= 0) {
      i_ctl = n;
      p[n++] = {control_fd_, POLLIN, 0};
    }
    if (status_fd_ >= 0) {
      i_st = n;
      p[n++] = {status_fd_, POLLIN, 0};
    }
    int r = poll(p, static_cast<nfds_t>(n), std::max(1, static_cast<int>(left * 1000)));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw SandboxError(std::string("sandbox: poll failed: ") + std::strerror(errno));
    }
    if (r == 0) continue;
    if (i_in >= 0 && p[i_in].revents) {
      ssize_t w = write_no_sigpipe(stdin_fd_, input.data() + written, input.size() - written);
      if (w > 0) {
        written += static_cast<size_t>(w);
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        close_fd(stdin_fd_);  // EPIPE: the child stopped reading; the rest is dropped
        written = input.size();
      }
    }
    if (i_out >= 0 && p[i_out].revents) read_into(stdout_fd_, x.stdout_text, x.stdout_bytes);
    if (i_err >= 0 && p[i_err].revents) read_into(stderr_fd_, x.stderr_text, x.stderr_bytes);
    if (i_ctl >= 0 && p[i_ctl].revents) {
      read_all(control_fd_, control_buf_);  // control lines are short: kept whole
      size_t nl = control_buf_.find('\n');
      if (nl != std::string::npos) {
        x.control_line = control_buf_.substr(0, nl);
        control_buf_.erase(0, nl + 1);
        // Output written before the control line is already in the pipes.
        if (stdout_fd_ >= 0) read_into(stdout_fd_, x.stdout_text, x.stdout_bytes);
        if (stderr_fd_ >= 0) read_into(stderr_fd_, x.stderr_text, x.stderr_bytes);
        break;
      }
    }
    if (i_st >= 0 && p[i_st].revents) {
      read_all(status_fd_, status_bytes_);
      if (status_fd_ < 0) {  // the init is exiting: the command is gone
        reap(/*blocking=*/true);
        drain_until_eof(2.0);
        finish_status(x);
        kill();  // closes the remaining pipes
        break;
      }
    }
  }
  x.wall_s = seconds_since(t0);
  return x;
}

SandboxResult run_sandboxed(const std::vector<std::string>& argv, const std::string& stdin_text,
                            const std::vector<std::string>& env, const SandboxOptions& options) {
  auto proc = SandboxProcess::start(argv, env, options, /*control_channel=*/false);
  SandboxResult r = proc->exchange(stdin_text, options.timeout_s, /*close_stdin=*/true);
  proc->kill();
  return r;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGTERM: return "SIGTERM";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace agentr1::env
