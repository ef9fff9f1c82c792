// agentr1 launch — start N data-parallel ranks on this machine, as torchrun does:
//
//   agentr1 launch --nproc 2 train data.train_batch_size=16      # 2 ranks of `agentr1 train`
//   agentr1 launch --nnodes 2 --node-rank 0 --nproc 4 --master-addr 10.0.0.1 train ...
//
// Each rank is this binary (or, when the first word is not an agentr1 command, that
// program) with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set (and OMP_NUM_THREADS, if unset, to this machine's cores / nproc).
// SIGINT and SIGTERM are forwarded to every rank (a training run stops after its step
// with a checkpoint); the ranks run in their own process groups, so a terminal's Ctrl-C
// reaches them once, through the launcher, and they get SIGTERM if the launcher dies. When a rank fails, the others get --grace-s seconds to notice it
// through their collectives and exit with their own message, then SIGTERM, then SIGKILL
// 10 s later. The exit code is the first failed rank's (128 + signal for a signal), or 0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include "agentr1/core/error.h"
#include "child_process.h"
#include "command.h"

namespace agentr1::cli {
namespace {

struct LaunchArgs {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  double grace_s = 30;
  std::vector<std::string> command;
};

// A port that was free a moment ago on `addr` (the kernel's pick for port 0).
int free_port(const std::string& addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  AGENTR1_CHECK(fd >= 0, "launch: socket(): " << std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(sa);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  close(fd);
  AGENTR1_CHECK(ok, "launch: cannot find a free port on " << addr << " (" << std::strerror(errno)
                                                          << "); HINT: pass --master-port");
  return ntohs(sa.sin_port);
}

bool is_agentr1_command(const std::string& word) {
  for (const auto& c : commands())
    if (c.name == word) return true;
  return false;
}

int run_launch(const LaunchArgs& a) {
  AGENTR1_CHECK(!a.command.empty(), "launch: no command to run; e.g. agentr1 launch --nproc 2 train");
  AGENTR1_CHECK(a.nproc >= 1 && a.nproc <= kMaxChildren, "launch: --nproc must be in 1.." << kMaxChildren << ", got "
                                                                                       << a.nproc);
  AGENTR1_CHECK(a.nnodes >= 1, "launch: --nnodes must be >= 1, got " << a.nnodes);
  AGENTR1_CHECK(a.node_rank >= 0 && a.node_rank < a.nnodes,
                "launch: --node-rank must be in 0.." << a.nnodes - 1 << ", got " << a.node_rank);
  AGENTR1_CHECK(a.master_port >= 0 && a.master_port <= 65535,
                "launch: --master-port must be in 0..65535 (0 = a free one, single node only), got " << a.master_port);
  AGENTR1_CHECK(a.master_port != 0 || a.nnodes == 1,
                "launch: --master-port 0 (pick a free port) works on one machine only; with --nnodes "
                    << a.nnodes << " every node must be given the same --master-port");
  AGENTR1_CHECK(a.grace_s >= 0, "launch: --grace-s must be >= 0, got " << a.grace_s);
  const int port = a.master_port != 0 ? a.master_port : free_port(a.master_addr);
  const int world = a.nnodes * a.nproc;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string omp = std::to_string(std::max(1, cores / a.nproc));

  // The program: this binary for an agentr1 command, else the named program.
  std::vector<std::string> argv_s;
  std::string program;
  if (is_agentr1_command(a.command[0])) {
    program = self_exe();
    argv_s.push_back("agentr1");
  } else {
    program = a.command[0];
  }
  for (const auto& w : a.command) argv_s.push_back(w);  // argv[0]: "agentr1", or the program

  // Signals go to the children from the moment the first one exists.
  forward_stop_signals();

  std::cerr << "agentr1 launch: " << a.nproc << " rank(s) on this node (node " << a.node_rank << " of " << a.nnodes
            << ", world size " << world << "), rendezvous at " << a.master_addr << ":" << port << "\n";
  std::vector<pid_t> children;
  for (int local = 0; local < a.nproc; ++local) {
    const int rank = a.node_rank * a.nproc + local;
    std::vector<std::string> env_s = environment_without(
        {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"});
    env_s.push_back("RANK=" + std::to_string(rank));
    env_s.push_back("WORLD_SIZE=" + std::to_string(world));
    env_s.push_back("LOCAL_RANK=" + std::to_string(local));
    env_s.push_back("LOCAL_WORLD_SIZE=" + std::to_string(a.nproc));
    env_s.push_back("GROUP_RANK=" + std::to_string(a.node_rank));
    env_s.push_back("MASTER_ADDR=" + a.master_addr);
    env_s.push_back("MASTER_PORT=" + std::to_string(port));
    if (std::getenv("OMP_NUM_THREADS") == nullptr) env_s.push_back("OMP_NUM_THREADS=" + omp);
    children.push_back(with_context("launch", [&] { return spawn_child(program, argv_s, env_s); }));
  }

  using Clock = std::chrono::steady_clock;
  int alive = a.nproc;
  int first_code = 0;
  Clock::time_point failed_at;
  bool failed = false;
  bool termed = false, killed = false;
  while (alive > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int local = -1;
      for (int i = 0; i < a.nproc; ++i)
        if (children[i] == pid) local = i;
      if (local < 0) continue;
      children[local] = 0;
      forget_child(pid);
      alive--;
      const int rank = a.node_rank * a.nproc + local;
      const int code = exit_code_of(status);
      // A stop the launcher forwarded (Ctrl-C, SIGTERM): 130 / 143 is the rank's clean stop.
      const bool clean_stop = stop_signalled() && (code == 130 || code == 143);
      if (clean_stop) {
        std::cerr << "agentr1 launch: rank " << rank << " stopped (exit code " << code << ")\n";
        if (first_code == 0) first_code = code;
        continue;
      }
      if (code != 0 && (first_code == 0 || first_code == 130 || first_code == 143)) {
        first_code = code;
        failed_at = Clock::now();
        failed = true;
        std::cerr << "agentr1 launch: rank " << rank << " (pid " << pid << ") " << describe_status(status);
        if (alive > 0) std::cerr << "; the other ranks get " << a.grace_s << " s to stop on their own";
        std::cerr << "\n";
      } else if (code != 0) {
        std::cerr << "agentr1 launch: rank " << rank << " (pid " << pid << ") " << describe_status(status) << "\n";
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (failed) {
      const double since = std::chrono::duration<double>(Clock::now() - failed_at).count();
      if (!termed && since >= a.grace_s) {
        std::cerr << "agentr1 launch: " << alive << " rank(s) still running " << a.grace_s
                  << " s after the failure; sending SIGTERM\n";
        signal_children(SIGTERM);
        termed = true;
      } else if (termed && !killed && since >= a.grace_s + 10) {
        std::cerr << "agentr1 launch: sending SIGKILL to the " << alive << " remaining rank(s)\n";
        signal_children(SIGKILL);
        killed = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return first_code;
}

Registrar reg("launch", "start N data-parallel ranks of a command on this machine (as torchrun does)",
              [](CLI::App& app) {
                auto a = std::make_shared<LaunchArgs>();
                app.add_option("--nproc,--nproc-per-node", a->nproc, "ranks on this machine")->required();
                app.add_option("--nnodes", a->nnodes, "machines in the job (each runs agentr1 launch)")
                    ->capture_default_str();
                app.add_option("--node-rank", a->node_rank, "this machine's index, 0..nnodes-1")->capture_default_str();
                app.add_option("--master-addr", a->master_addr, "address of rank 0's machine (the rendezvous)")
                    ->capture_default_str();
                app.add_option("--master-port", a->master_port, "rendezvous port; 0 = a free one (one machine only)")
                    ->capture_default_str();
                app.add_option("--grace-s", a->grace_s,
                               "after a rank fails, seconds the others get to stop on their own before SIGTERM")
                    ->capture_default_str();
                // Everything from the first word that is not a launch option on is the
                // command, passed through untouched, its own --flags included (main()
                // puts a "--" before it: launch_separator_index).
                app.add_option("command", a->command,
                               "an agentr1 command and its arguments (e.g. train key=value ... --resume), or a "
                               "program");
                app.footer(
                    "The command: an agentr1 command and its arguments (e.g. train key=value ... --resume), or a program.\n"
                    "Examples:\n  agentr1 launch --nproc 2 train data.train_batch_size=16\n"
                    "  agentr1 launch --nnodes 2 --node-rank 1 --nproc 4 --master-addr 10.0.0.1 --master-port 29500 train\n"
                    "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.");
                return [a]() { return run_launch(*a); };
              });

}  // namespace

int launch_separator_index(int argc, const char* const* argv) {
  if (argc < 2 || std::string(argv[1]) != "launch") return -1;
  for (int i = 2; i < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--") return -1;  // the user separated it already
    if (w.rfind("-", 0) != 0) return i;
    const bool takes_value = w == "--nproc" || w == "--nproc-per-node" || w == "--nnodes" || w == "--node-rank" ||
                             w == "--master-addr" || w == "--master-port" || w == "--grace-s" || w == "--log-level";
    if (takes_value) ++i;  // --name value (--name=value is one word)
  }
  return -1;
}

}  // namespace agentr1::cli
