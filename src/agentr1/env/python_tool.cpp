#include "agentr1/env/python_tool.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/text/tokenizer/unicode.h"

namespace agentr1::env {
namespace {

// The REPL driver run inside the sandbox as `python3 -E -s -u -c kDriver <cpu_s>`.
// Protocol: it writes "ready" on fd 3 once started; then per cell it reads
// "<n bytes>\n<source>" from stdin, exec()s the source in one globals dict with stdin
// at /dev/null, flushes stdout/stderr and writes "ok", "error" or "exit <code>" on fd 3.
// Before each cell the soft RLIMIT_CPU is moved to (CPU used so far) + cpu_s.
constexpr const char* kDriver = R"PY(
import builtins, linecache, os, resource, sys, traceback
def _agentr1_driver():
    cpu_s = int(sys.argv[1])
    ctl = os.fdopen(3, "w", buffering=1)
    os.set_inheritable(3, False)
    inp = os.fdopen(os.dup(0), "rb")
    nul = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nul, 0)
    os.close(nul)
    me = os.getpid()
    g = {"__name__": "__main__", "__builtins__": builtins}
    ctl.write("ready\n")
    n_cell = 0
    while True:
        header = inp.readline()
        if not header:
            return
        src = inp.read(int(header)).decode("utf-8", "replace")
        n_cell += 1
        name = "<cell %d>" % n_cell
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        try:
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            ru = resource.getrusage(resource.RUSAGE_SELF)
            want = int(ru.ru_utime + ru.ru_stime) + 1 + cpu_s
            if hard != resource.RLIM_INFINITY:
                want = min(want, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
        except Exception:
            pass
        status = "ok"
        try:
            exec(compile(src, name, "exec"), g)
        except SystemExit as e:
            code = e.code
            if code is None:
                code = 0
            elif not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
            status = "exit %d" % code
        except BaseException as e:
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            status = "error"
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        if os.getpid() != me:
            os._exit(0)
        ctl.write(status + "\n")
_agentr1_driver()
)PY";

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Output of one stream for the model: valid UTF-8, with a note when cut.
std::string stream_text(const std::string& kept, size_t total, const char* name) {
  std::string s = text::sanitize_utf8(kept);
  if (total > kept.size()) {
    if (!s.empty() && s.back() != '\n') s += '\n';
    s += "[" + std::string(name) + " truncated: the first " + std::to_string(kept.size()) +
         " of " + std::to_string(total) + " bytes are shown]\n";
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------
// Options

void PythonToolOptions::validate() const {
  AGENTR1_CHECK(mode == "fresh" || mode == "session",
                "python tool mode must be 'fresh' or 'session', got '" << mode << "'");
  AGENTR1_CHECK(!python.empty() && python[0] == '/',
                "python tool python must be an absolute path (e.g. /usr/bin/python3), got '"
                    << python << "'");
  AGENTR1_CHECK(timeout_s > 0, "python tool timeout_s must be > 0, got " << timeout_s);
  AGENTR1_CHECK(cpu_s >= 1, "python tool cpu_s must be >= 1, got " << cpu_s);
  AGENTR1_CHECK(session_cpu_s >= cpu_s, "python tool session_cpu_s must be >= cpu_s (" << cpu_s
                                                                                    << "), got "
                                                                                    << session_cpu_s);
  AGENTR1_CHECK(memory_mb >= 64, "python tool memory_mb must be >= 64, got " << memory_mb);
  AGENTR1_CHECK(max_processes >= 4, "python tool max_processes must be >= 4, got " << max_processes);
  AGENTR1_CHECK(max_file_mb >= 1, "python tool max_file_mb must be >= 1, got " << max_file_mb);
  AGENTR1_CHECK(max_output_chars >= 16,
                "python tool max_output_chars must be >= 16, got " << max_output_chars);
  AGENTR1_CHECK(max_code_chars >= 1, "python tool max_code_chars must be >= 1, got " << max_code_chars);
  AGENTR1_CHECK(!scratch_root.empty() && scratch_root[0] == '/',
                "python tool scratch_root must be an absolute path, got '" << scratch_root << "'");
  AGENTR1_CHECK(network == "none" || network == "host",
                "python tool network must be 'none' or 'host', got '" << network << "'");
  for (const std::string& h : hide_paths) {
    AGENTR1_CHECK(!h.empty() && h[0] == '/' && h != "/",
                  "python tool hide_paths entries must be absolute directories other than /, got '"
                      << h << "'");
  }
}

PythonToolOptions PythonToolOptions::from_json(const json& kwargs) {
  return bind_config<PythonToolOptions>(
      json{{"env_kwargs",
            {{"tool_kwargs", {{"python", kwargs.is_null() ? json::object() : kwargs}}}}}},
      "env_kwargs.tool_kwargs.python");
}

SandboxOptions PythonToolOptions::sandbox_options(const std::string& scratch_dir) const {
  SandboxOptions s;
  s.scratch_dir = scratch_dir;
  s.timeout_s = timeout_s;
  // The driver moves the soft limit to (used + cpu_s) before each cell; the hard limit
  // bounds one fresh call or a whole session.
  s.cpu_s = mode == "session" ? session_cpu_s : cpu_s + 1;
  s.cpu_hard_s = s.cpu_s + 1;
  s.memory_mb = memory_mb;
  s.max_processes = max_processes;
  s.max_file_mb = max_file_mb;
  s.max_output_bytes = static_cast<size_t>(max_output_chars);
  s.network = network == "host";
  s.hide_paths = hide_paths;
  return s;
}

// ---------------------------------------------------------------------------------
// The tool

PythonTool::PythonTool(PythonToolOptions options) : opts_(std::move(options)) { opts_.validate(); }

PythonTool::~PythonTool() {
  {
    std::lock_guard<std::mutex> lock(session_mu_);
    session_.reset();  // kills and reaps the interpreter
  }
  std::lock_guard<std::mutex> lock(scratch_mu_);
  if (!scratch_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);
  }
}

std::string PythonTool::description() const {
  std::string d =
      "Runs Python 3 code in a sandbox and returns what it prints: stdout, then stderr "
      "(tracebacks). Use print() to see results; the value of the last expression is not "
      "shown. ";
  d += opts_.mode == "session"
           ? "Variables, functions and imports persist across calls in this conversation. "
           : "Each call starts a fresh interpreter: variables do not persist between calls "
             "(files in the working directory do). ";
  d += "Limits per call: " + fmt_seconds(opts_.timeout_s) + " s, " + std::to_string(opts_.memory_mb) +
       " MB of memory" + (opts_.network == "host" ? "" : ", no network access") +
       "; files can be written only in the working directory and /tmp.";
  return d;
}

json PythonTool::parameters() const {
  return json{{"type", "object"},
              {"properties",
               {{"code",
                 {{"type", "string"},
                  {"description",
                   "The Python code to run, e.g. \"import math\\nprint(math.factorial(20))\"."}}}}},
              {"required", json::array({"code"})}};
}

std::string PythonTool::scratch_dir() const {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  return scratch_;
}

pid_t PythonTool::session_pid() const {
  std::lock_guard<std::mutex> lock(session_mu_);
  return session_ && !session_->exited() ? session_->pid() : -1;
}

std::string PythonTool::ensure_scratch() {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  if (!scratch_.empty()) return scratch_;
  std::error_code ec;
  std::filesystem::create_directories(opts_.scratch_root, ec);
  if (ec) {
    throw ToolInfraError("python tool: cannot create scratch_root '" + opts_.scratch_root +
                         "': " + ec.message());
  }
  std::string templ = opts_.scratch_root + "/py-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    throw ToolInfraError("python tool: cannot create a scratch directory in '" +
                         opts_.scratch_root + "': " + std::strerror(errno));
  }
  if (geteuid() == 0) {
    // The sandbox runs as a host uid of its own (SandboxOptions::uid): give it the dir.
    SandboxOptions defaults;
    if (chown(templ.c_str(), defaults.uid, defaults.gid) != 0) {
      int e = errno;
      std::filesystem::remove_all(templ, ec);
      throw ToolInfraError("python tool: chown of scratch dir '" + templ + "': " + std::strerror(e));
    }
  }
  scratch_ = templ;
  return scratch_;
}

std::unique_ptr<SandboxProcess> PythonTool::start_interpreter(const std::string& scratch) {
  SandboxOptions so = opts_.sandbox_options(scratch);
  std::vector<std::string> argv = {opts_.python, "-E", "-s", "-u", "-c", kDriver,
                                   std::to_string(opts_.cpu_s)};
  std::vector<std::string> env = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + scratch, "TMPDIR=/tmp", "LANG=C.UTF-8",
      "LC_ALL=C.UTF-8", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1",
      "MPLBACKEND=Agg"};
  std::unique_ptr<SandboxProcess> proc;
  try {
    proc = SandboxProcess::start(argv, env, so, /*control_channel=*/true);
  } catch (const SandboxError& e) {
    throw ToolInfraError("python tool: the sandbox could not start: " + std::string(e.what()));
  }
  SandboxExchange ready = proc->exchange("", so.start_timeout_s);
  if (!ready.control_line || *ready.control_line != "ready") {
    std::string why = ready.timed_out ? "it did not report ready within " +
                                            fmt_seconds(so.start_timeout_s) + " s"
                      : ready.signal ? "it was killed by " + signal_name(ready.signal)
                                     : "it exited with status " + std::to_string(ready.exit_code);
    std::string err = text::sanitize_utf8(ready.stderr_text.substr(0, 600));
    throw ToolInfraError("python tool: the interpreter " + opts_.python + " did not start: " +
                         why + (err.empty() ? "" : "; stderr: " + err));
  }
  return proc;
}

ToolResult PythonTool::execute(const json& args) {
  ToolResult out;
  out.info = {{"mode", opts_.mode}};
  auto arg_error = [&](const std::string& msg) {
    out.text = "Error: " + msg;
    out.info["error"] = true;
    out.info["error_kind"] = "argument";
    return out;
  };
  if (!args.is_object()) {
    return arg_error(std::string("arguments must be a JSON object like {\"code\": \"print(1)\"}, got ") +
                     args.type_name());
  }
  auto it = args.find("code");
  if (it == args.end()) return arg_error("missing required argument 'code' (Python source as a string)");
  if (!it->is_string()) {
    return arg_error(std::string("argument 'code' must be a string of Python source, got ") +
                     it->type_name());
  }
  const std::string& code = it->get_ref<const std::string&>();
  if (code.size() > static_cast<size_t>(opts_.max_code_chars)) {
    return arg_error("the code is " + std::to_string(code.size()) + " bytes long; the limit is " +
                     std::to_string(opts_.max_code_chars));
  }
  std::string scratch = ensure_scratch();
  std::string cell = std::to_string(code.size()) + "\n" + code;
  const bool session = opts_.mode == "session";

  SandboxExchange x;
  std::string note;  // said before the output
  if (session) {
    std::lock_guard<std::mutex> lock(session_mu_);
    bool restarted = false;
    if (!session_ || session_->exited()) {
      if (!session_lost_.empty()) {
        note = "Note: a fresh interpreter was started; variables from earlier calls are gone (" +
               session_lost_ + ").\n";
        restarted = true;
      }
      session_.reset();
      session_ = start_interpreter(scratch);
      session_lost_.clear();
    }
    x = session_->exchange(cell, opts_.timeout_s);
    if (x.exited) {
      session_->kill();
      session_lost_ = x.timed_out ? "the previous interpreter timed out"
                                  : "the previous interpreter ended";
    }
    out.info["session_restarted"] = restarted;
  } else {
    auto proc = start_interpreter(scratch);
    x = proc->exchange(cell, opts_.timeout_s);
    proc->kill();
  }

  // Text for the model.
  std::string text = note + stream_text(x.stdout_text, x.stdout_bytes, "stdout");
  std::string err = stream_text(x.stderr_text, x.stderr_bytes, "stderr");
  if (!err.empty()) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += err;
  }
  std::string status, kind;
  const std::string lost = session ? " The interpreter's state is lost; the next call starts a fresh one." : "";
  if (x.timed_out) {
    kind = "timeout";
    status = "Error: timed out after " + fmt_seconds(opts_.timeout_s) +
             " s; the process group was killed." + lost;
  } else if (x.control_line) {
    const std::string& line = *x.control_line;
    if (line == "ok") {
      x.exit_code = 0;
    } else if (line == "error") {
      kind = "exception";  // the traceback is on stderr
      x.exit_code = 1;
    } else if (line.rfind("exit ", 0) == 0) {
      int c = std::atoi(line.c_str() + 5);
      x.exit_code = c;
      if (c != 0) {
        kind = "exit";
        status = "Error: the code called exit with status " + std::to_string(c) + ".";
      }
    }
  } else if (x.exited) {
    kind = x.signal ? "signal" : "exit";
    if (x.signal == SIGXCPU) {
      status = "Error: CPU time limit exceeded (" + std::to_string(opts_.cpu_s) +
               " s); the process was killed." + lost;
    } else if (x.signal == SIGXFSZ) {
      status = "Error: file size limit exceeded (" + std::to_string(opts_.max_file_mb) +
               " MB); the process was killed." + lost;
    } else if (x.signal == SIGKILL) {
      status = "Error: the process was killed (SIGKILL), most likely by a resource limit (CPU time or memory)." + lost;
    } else if (x.signal) {
      status = "Error: the process was killed by " + signal_name(x.signal) + "." + lost;
    } else {
      status = "Error: the interpreter exited with status " + std::to_string(x.exit_code) + "." + lost;
    }
  }
  if (!status.empty()) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += status;
  }
  if (text.empty()) text = "(no output; use print() to see values)";
  out.text = std::move(text);
  out.info["error"] = !kind.empty();
  if (!kind.empty()) out.info["error_kind"] = kind;
  out.info["exit_code"] = x.exit_code;
  out.info["signal"] = x.signal;
  out.info["timed_out"] = x.timed_out;
  out.info["wall_s"] = x.wall_s;
  out.info["stdout_bytes"] = x.stdout_bytes;
  out.info["stderr_bytes"] = x.stderr_bytes;
  return out;
}

void register_python_tool() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_tool("python", [](const json& kwargs) -> std::unique_ptr<Tool> {
      return std::make_unique<PythonTool>(PythonToolOptions::from_json(kwargs));
    });
  });
}

}  // namespace agentr1::env
