// agentr1/env/sandbox.h — run an untrusted command in a fresh, contained child process
// (Linux; torch-free). The python tool (python_tool.h) is its user; docs/sandbox.md has
// the threat model.
//
//   SandboxOptions o;
//   o.scratch_dir = "/tmp/agentr1-sandbox/py-Ab12Cd";    // exists; the child's cwd
//   SandboxResult r = run_sandboxed({"/usr/bin/python3", "-c", "print(2+3)"}, "", {}, o);
//   // r.exit_code == 0, r.stdout_text == "5\n"
//
//   // A long-lived child (a REPL): fd 3 of the child is a control channel; each
//   // exchange() ends when the child writes one line to it.
//   auto p = SandboxProcess::start(argv, env, o, /*control_channel=*/true);
//   SandboxExchange x = p->exchange("cell text", /*timeout_s=*/4.0);
//   // x.control_line ("ok"), or x.exited / x.timed_out (the sandbox was killed)
//
// What one sandbox is: a child made with clone() in new user, mount, PID, IPC, UTS and
// (unless options.network) network namespaces. Its pid 1 is a tiny init of ours that
// reaps orphans and reports the command's wait status; the command runs as its child
// with:
//   - the host uid/gid options.uid/options.gid (nobody) when we are root, else our own
//     (unprivileged user namespaces); uid 0 inside, all capabilities dropped, no_new_privs;
//   - every mount read-only and nosuid; scratch_dir bound read-write at its own path; a
//     private tmpfs on /tmp and /dev/shm (options.max_file_mb each); options.hide_paths
//     covered by empty read-only tmpfs; a fresh /proc for the new PID namespace;
//   - rlimits: RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC (enforced: the host uid is not root,
//     and the count is per user namespace, so per sandbox), RLIMIT_FSIZE, RLIMIT_NOFILE,
//     RLIMIT_CORE 0;
//   - its own process group; on timeout SIGKILL goes to the group and to the init, and
//     the init's death takes every process of the PID namespace with it (setsid() does
//     not escape), then the init is reaped: nothing is left behind.
// Everything between clone() and execve() is raw system calls (the caller may be
// multi-threaded). The caller's process must not reap children with waitpid(-1).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::env {

// The sandbox could not be created or the command could not be started (clone/unshare
// refused, a mount failed, execve failed: a missing binary). Never thrown for what the
// command itself did (nonzero exit, a signal, a timeout).
class SandboxError : public Error {
 public:
  explicit SandboxError(const std::string& what) : Error(what) {}
};

struct SandboxOptions {
  std::string scratch_dir;          // the child's cwd and its only writable host directory;
                                    // must exist, absolute; the host uid must be able to
                                    // reach it (searchable parents)
  double timeout_s = 4.0;           // wall-clock limit of run_sandboxed (exchange() takes
                                    // its own); then the process group is SIGKILLed; > 0
  double start_timeout_s = 10.0;    // limit on setting the sandbox up until execve; > 0
  int cpu_s = 4;                    // RLIMIT_CPU soft limit, seconds (SIGXCPU); >= 1
  int cpu_hard_s = 0;               // RLIMIT_CPU hard limit (SIGKILL); 0 = cpu_s + 1
  int memory_mb = 1024;             // RLIMIT_AS, MiB of address space; >= 16
  int max_processes = 64;           // RLIMIT_NPROC: processes + threads of the sandbox; >= 2
  int max_file_mb = 16;             // RLIMIT_FSIZE (largest file written), MiB; also the
                                    // size of the private /tmp and /dev/shm; >= 1
  int max_open_files = 256;         // RLIMIT_NOFILE; >= 16
  size_t max_output_bytes = 65536;  // bytes kept of stdout and of stderr each; the rest is
                                    // read and counted but dropped; >= 1
  bool network = false;             // true: share the host's network (no new network
                                    // namespace); false: only a loopback that is down
  std::vector<std::string> hide_paths;  // absolute directories covered by an empty read-only
                                        // tmpfs (those that do not exist are skipped)
  uid_t uid = 65534;                // host uid of the sandbox when the caller is root
  gid_t gid = 65534;                // host gid of the sandbox when the caller is root

  // Throws Error naming the field, the rule and the value.
  void validate() const;
};

// One exchange with a sandboxed process (see SandboxProcess::exchange).
struct SandboxExchange {
  std::string stdout_text;          // the first max_output_bytes bytes
  std::string stderr_text;
  size_t stdout_bytes = 0;          // bytes the child wrote in all (kept + dropped)
  size_t stderr_bytes = 0;
  std::optional<std::string> control_line;  // the line on the control channel, without '\n'
  bool timed_out = false;           // the deadline passed; the sandbox was killed
  bool exited = false;              // the command is gone (exited, killed, or timed out)
  int exit_code = -1;               // its exit status when it exited normally, else -1
  int signal = 0;                   // the signal that ended it, else 0 (SIGKILL on timeout)
  double wall_s = 0;                // seconds this exchange took
  bool stdout_truncated() const { return stdout_bytes > stdout_text.size(); }
  bool stderr_truncated() const { return stderr_bytes > stderr_text.size(); }
};

using SandboxResult = SandboxExchange;

class SandboxProcess {
 public:
  // Starts argv[0] (an absolute path; PATH is not searched) with exactly `env` ("K=V")
  // in a new sandbox. control_channel: the child's fd 3 is the write end of a pipe that
  // exchange() watches for lines. Returns once the command has been exec'ed. Throws
  // SandboxError when the sandbox could not be set up or execve failed (the message
  // names the step and the errno text, with a hint where one helps), Error when the
  // options are invalid.
  static std::unique_ptr<SandboxProcess> start(const std::vector<std::string>& argv,
                                               const std::vector<std::string>& env,
                                               const SandboxOptions& options,
                                               bool control_channel = false);
  ~SandboxProcess();  // kill()
  SandboxProcess(const SandboxProcess&) = delete;
  SandboxProcess& operator=(const SandboxProcess&) = delete;

  // Writes `input` to the child's stdin (then closes it when close_stdin), and reads
  // stdout and stderr (without deadlock: all pipes are polled) until the first of: a
  // full line on the control channel; the command ending (its remaining output is read);
  // timeout_s passing (then kill(): timed_out, exited, signal SIGKILL). Not thread-safe;
  // one exchange at a time. On a process that is already gone it returns at once with
  // exited set.
  SandboxExchange exchange(const std::string& input, double timeout_s, bool close_stdin = false);

  // SIGKILL to the process group and to the sandbox's init, then reaps it (every process
  // of the sandbox is gone when this returns). Idempotent; never throws.
  void kill();
  bool exited() const { return reaped_; }
  pid_t pid() const { return pid_; }   // the init's pid (also the process group id)

 private:
  SandboxProcess() = default;
  void reap(bool blocking);
  void finish_status(SandboxExchange& x);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int stdin_fd_ = -1, stdout_fd_ = -1, stderr_fd_ = -1, control_fd_ = -1, status_fd_ = -1;
  std::string status_bytes_;   // the command's wait status, from the init
  std::string control_buf_;    // control channel bytes not yet ending in '\n'
  size_t max_output_bytes_ = 0;
};

// start(argv, env, options), exchange(stdin_text, options.timeout_s, close_stdin), then
// the process is killed and reaped. Throws as start() does.
SandboxResult run_sandboxed(const std::vector<std::string>& argv, const std::string& stdin_text,
                            const std::vector<std::string>& env, const SandboxOptions& options);

// "SIGKILL", "SIGXCPU", ... ("signal N" for others).
std::string signal_name(int sig);

}  // namespace agentr1::env
