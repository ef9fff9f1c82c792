// agentr1/apps/child_process.h — child processes of the CLI (launch's ranks, benchmark's
// workers): each runs in its own process group (a terminal's Ctrl-C reaches the parent
// only, which forwards it once), gets SIGTERM when the parent dies (even by SIGKILL),
// and receives the SIGINT/SIGTERM the parent gets.
//
//   forward_stop_signals();                       // once, before the first spawn
//   pid_t pid = spawn_child(self_exe(), {"agentr1", "train", "trainer.threads=1"},
//                           environment_without({}), "runs/x/worker.log");
//   int status = 0;
//   waitpid(pid, &status, 0);
//   forget_child(pid);
//   if (exit_code_of(status) != 0) std::cerr << "worker " << describe_status(status);
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace agentr1::cli {

// This program's path (/proc/self/exe). Throws Error when it cannot be read.
std::string self_exe();

// This process's environment as NAME=VALUE strings, without the variables named in `drop`.
std::vector<std::string> environment_without(const std::vector<std::string>& drop);

// Installs the SIGINT/SIGTERM handler that forwards the signal to every child spawned
// by spawn_child and not yet forgotten, and records that a stop was asked for (SIGCHLD
// is reset to its default, so waitpid sees the children). restore_stop_signals puts the
// earlier handlers back (a parent that goes on working after its children).
void forward_stop_signals();
void restore_stop_signals();
bool stop_signalled();
int stop_signal();  // the last stop signal received (SIGINT or SIGTERM), 0 = none

// fork + exec of `program` (a path, or a name looked up in PATH) with argv and the full
// environment env. log_file: the child's stdout and stderr go there (created or
// truncated; "" = inherited). The child is registered for signal forwarding; a stop
// signal that arrived meanwhile is sent to it too. Throws Error when fork fails (at most
// kMaxChildren live).
pid_t spawn_child(const std::string& program, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, const std::string& log_file = "");
constexpr int kMaxChildren = 1024;

// Unregisters a reaped child.
void forget_child(pid_t pid);
// Sends sig to every registered child.
void signal_children(int sig);

// "exited with code N" / "was killed by signal N"; 128 + signal for a signal.
std::string describe_status(int status);
int exit_code_of(int status);

}  // namespace agentr1::cli
