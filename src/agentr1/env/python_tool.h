// agentr1/env/python_tool.h — the "python" tool: a code interpreter in a sandbox.
//
//   register_python_tool();                                  // once (idempotent)
//   auto py = make_tool("python", {{"mode", "session"}});    // one per ToolEnv = episode
//   ToolResult r = py->execute({{"code", "x = 2 + 3\nprint(x)"}});   // r.text == "5\n"
//   r = py->execute({{"code", "print(x * 2)"}});             // session: "10\n"
//
// Each call runs the model's code with Debian's python3 (options.python) inside a
// sandbox (sandbox.h; docs/sandbox.md has the threat model): no network, only the
// episode's scratch directory (its cwd) and a private /tmp writable, rlimits on CPU,
// memory, processes and file size, and a wall-clock timeout that kills the whole
// process group. A small driver (Python source kept in python_tool.cpp) runs in the
// sandbox: it exec()s each code cell in one globals dict, prints tracebacks without its
// own frames, and reports each cell's end on a control pipe (fd 3), so the output needs
// no sentinel text.
//
// Modes (kwargs "mode"):
//   fresh   (default) a new interpreter per call; files in the scratch directory persist
//           across the episode's calls, variables do not;
//   session one interpreter per tool instance (= per episode), state kept across calls
//           (ReTool). If it dies (timeout, a limit, os._exit), the call says so and the
//           next call starts a fresh one, saying the earlier state is gone.
//
// What the model sees: stdout, then stderr (tracebacks) if any, each cut at
// max_output_chars bytes with a note, then a status line for failures
// ("Error: timed out after 4 s; the process group was killed"). The value of the last
// expression is not echoed: printing is the interface (the description says so).
//
// Failures: the code's own (exception, nonzero exit, timeout, a limit hit) are the
// tool's text, with info {"error": true, "error_kind": ...}; a sandbox that could not
// start (no user namespaces, python missing, scratch not creatable) throws
// ToolInfraError, which ToolEnv counts as the infrastructure's failure.
//
// Timeouts: ToolEnv abandons a call after its tool_timeout_s (default 5 s) but cannot
// stop the thread; this tool's own timeout_s (default 4 s, for the cell alone; sandbox
// start-up adds ~0.1 s) is what kills the process. Keep timeout_s about 1 s below
// tool_timeout_s so the model gets this tool's message and partial output.
//
// Thread safety: execute() may be called concurrently (ToolEnv runs a turn's calls in
// parallel): fresh calls run in parallel, session calls one at a time. The destructor
// kills the session's interpreter and removes the scratch directory.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/env/sandbox.h"
#include "agentr1/env/tool.h"

namespace agentr1::env {

struct PythonToolOptions {
  std::string mode = "fresh";              // fresh (new interpreter per call) | session
                                           // (state kept across the episode's calls)
  std::string python = "/usr/bin/python3"; // absolute path of the interpreter (not PATH's:
                                           // a pyenv shim would not run in the sandbox)
  double timeout_s = 4.0;                  // wall-clock limit per call; then the process
                                           // group is killed; > 0
  int cpu_s = 4;                           // CPU seconds per call (RLIMIT_CPU); >= 1
  int session_cpu_s = 300;                 // session: CPU seconds for the interpreter's
                                           // whole life (hard RLIMIT_CPU); >= cpu_s
  int memory_mb = 1024;                    // address space (RLIMIT_AS), MiB; >= 64
  int max_processes = 64;                  // processes + threads (RLIMIT_NPROC); >= 4
  int max_file_mb = 16;                    // largest file written (RLIMIT_FSIZE), and the
                                           // size of the private /tmp, MiB; >= 1
  int max_output_chars = 8192;             // bytes kept of stdout and of stderr each; >= 16
  int max_code_chars = 65536;              // longer code is refused (an error text); >= 1
  std::string scratch_root = "/tmp/agentr1-sandbox";  // per-episode scratch dirs go here
  std::string network = "none";            // none (own network namespace) | host (share
                                           // the host's network: an explicit opt-out)
  std::vector<std::string> hide_paths = {"/root", "/home", "/work", "/srv",
                                         "/mnt", "/media", "/data"};
                                           // directories covered by an empty tmpfs in the
                                           // sandbox (datasets and answers live there)

  // The python tool's kwargs (env_kwargs.tool_kwargs.python), bound by bind_config.
  template <class V>
  void visit(V& v) {
    v.field("mode", mode, "fresh (new interpreter per call) | session (state kept per episode)");
    v.field("python", python, "absolute path of the python3 interpreter");
    v.field("timeout_s", timeout_s, "wall-clock limit per call, seconds (keep below tool_timeout_s)");
    v.field("cpu_s", cpu_s, "CPU seconds per call");
    v.field("session_cpu_s", session_cpu_s, "session mode: CPU seconds for the interpreter's life");
    v.field("memory_mb", memory_mb, "address-space limit, MiB");
    v.field("max_processes", max_processes, "processes + threads in the sandbox");
    v.field("max_file_mb", max_file_mb, "largest file written and size of /tmp, MiB");
    v.field("max_output_chars", max_output_chars, "bytes kept of stdout and of stderr each");
    v.field("max_code_chars", max_code_chars, "longest code accepted");
    v.field("scratch_root", scratch_root, "directory holding the per-episode scratch dirs");
    v.field("network", network, "none (no network) | host (share the host's network)");
    v.field("hide_paths", hide_paths, "directories hidden (empty) inside the sandbox");
  }
  // Throws Error naming the field, the rule and the value.
  void validate() const;
  // kwargs (null = defaults) bound and validated; errors name
  // env_kwargs.tool_kwargs.python.<key>.
  static PythonToolOptions from_json(const json& kwargs);
  // The sandbox options one call (fresh) or one interpreter (session) runs under.
  SandboxOptions sandbox_options(const std::string& scratch_dir) const;
};

class PythonTool : public Tool {
 public:
  explicit PythonTool(PythonToolOptions options = {});   // validates; starts nothing
  ~PythonTool() override;                                 // kills the session, removes scratch

  std::string name() const override { return "python"; }
  std::string description() const override;
  // {"type":"object","properties":{"code":{"type":"string",...}},"required":["code"]}
  json parameters() const override;
  // args: {"code": "<python source>"}. Returns the output text (see the header comment);
  // info {"error", "error_kind" (on errors: argument, exception, exit, timeout, signal),
  // "mode", "exit_code", "signal", "timed_out", "wall_s", "stdout_bytes", "stderr_bytes",
  // "session_restarted"}. Throws ToolInfraError when the sandbox or the interpreter could
  // not start.
  ToolResult execute(const json& args) override;

  const PythonToolOptions& options() const { return opts_; }
  // The episode's scratch directory ("" until the first call creates it).
  std::string scratch_dir() const;
  // The session interpreter's sandbox init pid, or -1 (tests check it is gone).
  pid_t session_pid() const;

 private:
  std::string ensure_scratch();   // throws ToolInfraError
  std::unique_ptr<SandboxProcess> start_interpreter(const std::string& scratch);

  PythonToolOptions opts_;
  mutable std::mutex scratch_mu_;
  std::string scratch_;
  mutable std::mutex session_mu_;             // one session call at a time
  std::unique_ptr<SandboxProcess> session_;
  std::string session_lost_;                  // why the last session ended ("" = none)
  int cell_index_ = 0;
};

// Registers the tool "python" (kwargs: PythonToolOptions). Thread-safe and idempotent;
// throws Error if another component registered "python".
void register_python_tool();

}  // namespace agentr1::env
