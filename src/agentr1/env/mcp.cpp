#include "agentr1/env/mcp.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

extern char** environ;

namespace agentr1::env {
namespace {

using Clock = std::chrono::steady_clock;

// The protocol revision we ask for, and the ones whose tools/* messages we understand
// (they all share the shapes this client uses).
constexpr const char* kProtocolVersion = "2025-06-18";
const char* const kKnownVersions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
constexpr size_t kStderrKeep = 16 * 1024;     // bytes of the server's stderr kept
constexpr size_t kMaxLineBytes = 64u << 20;   // a longer stdout line is malformed
constexpr int kStderrLinesShown = 8;          // in error messages
constexpr int kMaxListPages = 1000;

Clock::time_point after_seconds(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

int ms_until(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, INT_MAX));
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string cut(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// The last `n` non-empty lines of `text`, each indented, or "" when there are none.
std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(cut(line, 300));
    start = end + 1;
  }
  std::string out;
  const size_t first = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0;
  for (size_t i = first; i < lines.size(); ++i) out += "\n  " + lines[i];
  return out;
}

bool is_executable_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Writes all of `data` to the non-blocking `fd` before `deadline`. SIGPIPE (a reader
// that is gone) is blocked on this thread and any one it raised is consumed, so a dead
// server is an EPIPE here, never a signal that kills the trainer. Returns "" or why not.
std::string write_all(int fd, const std::string& data, Clock::time_point deadline) {
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  std::string error;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int wait_ms = ms_until(deadline);
      if (wait_ms == 0) {
        error = "its stdin did not take the request in time (the server is not reading)";
        break;
      }
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, std::min(wait_ms, 100));
      continue;
    }
    error = std::string("writing to its stdin failed: ") + std::strerror(errno);
    if (errno == EPIPE && !was_pending) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_set, nullptr, &zero);
    }
    break;
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  return error;
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

// ---------------------------------------------------------------------------------
// McpServerSpec

void McpServerSpec::validate() const {
  AGENTR1_CHECK(!name.empty(), "'name' is required: a short name for the server, e.g. \"search\"");
  for (char c : name)
    AGENTR1_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-',
                  "'name' is \"" << name << "\"; use letters, digits, _ and - only (it prefixes tool names)");
  AGENTR1_CHECK(!command.empty(), "'command' of MCP server '" << name
                                      << "' is empty; give the executable that starts it, e.g. \"npx\"");
  AGENTR1_CHECK(startup_timeout_s > 0, "'startup_timeout_s' must be > 0 (seconds), got " << startup_timeout_s);
  AGENTR1_CHECK(call_timeout_s >= 0,
                "'call_timeout_s' must be >= 0 (seconds; 0 = just under the env's tool_timeout_s), got " << call_timeout_s);
  AGENTR1_CHECK(pool_size >= 1 && pool_size <= 64, "'pool_size' must be in 1..64 (processes), got " << pool_size);
  for (const auto& kv : env)
    AGENTR1_CHECK(!kv.first.empty() && kv.first.find('=') == std::string::npos,
                  "'env' has the variable name \"" << kv.first << "\"; names must be non-empty and without '='");
  for (size_t i = 0; i < tools.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      AGENTR1_CHECK(tools[i] != tools[j], "'tools' lists '" << tools[i] << "' twice; list each tool once");
}

McpServerSpec McpServerSpec::from_json(const json& j, const std::string& key) {
  json tree = json::object();
  tree[key] = j;
  McpServerSpec spec;
  bind_into(spec, tree, key);
  return spec;
}

json McpServerSpec::to_json() const { return config_to_json(*this); }

std::string McpServerSpec::describe() const {
  std::string out = "'" + name + "' (" + command;
  for (const auto& a : args) out += " " + a;
  return out + ")";
}

// ---------------------------------------------------------------------------------
// One server process

class McpServer::Process {
 public:
  explicit Process(const McpServerSpec& spec) : spec_(spec) {}
  ~Process() { stop(); }

  // Makes sure the child runs and is initialised (spawning, or re-spawning a dead one,
  // bounded by startup_timeout_s). Waits for another thread's start until `deadline`.
  void ensure_started(Clock::time_point deadline) {
    std::unique_lock<std::timed_mutex> start(start_mu_, std::defer_lock);
    if (!start.try_lock_until(deadline))
      throw ToolInfraError(message("did not finish starting in time"));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ready_ && running_) return;
    }
    if (pid_ > 0) {
      std::string why;
      {
        std::lock_guard<std::mutex> lock(mu_);
        why = dead_reason_.empty() ? "stopped" : dead_reason_;
      }
      AGENTR1_LOG(WARN) << "MCP server " << spec_.describe() << ": restarting a process that " << why;
    }
    stop_locked();
    const Clock::time_point startup = after_seconds(spec_.startup_timeout_s);
    spawn();
    try {
      initialize(startup);
    } catch (...) {
      stop_locked();
      throw;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ready_ = true;
  }

  // Sends a request and waits for its response (the whole JSON-RPC message) until
  // `deadline`. Throws ToolInfraError when the process is not running, dies, breaks the
  // protocol or does not answer in time.
  json request(const std::string& method, const json& params, Clock::time_point deadline,
               double timeout_s) {
    auto pending = std::make_shared<Pending>();
    int64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_) throw ToolInfraError(message(dead_reason_.empty() ? "is not running" : dead_reason_));
      id = next_id_++;
      pending_[id] = pending;
    }
    in_flight_.fetch_add(1);
    struct Done {
      std::atomic<int>& n;
      ~Done() { n.fetch_sub(1); }
    } done{in_flight_};
    json msg = json::object();
    msg["jsonrpc"] = "2.0";
    msg["id"] = id;
    msg["method"] = method;
    msg["params"] = params;
    const std::string error = send(dump(msg) + "\n", deadline);
    if (!error.empty()) {
      fail(error);
      throw ToolInfraError(message(error));
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return pending->done; })) {
      pending_.erase(id);
      lock.unlock();
      json cancel = json::object();
      cancel["requestId"] = id;
      cancel["reason"] = "timed out";
      notify("notifications/cancelled", cancel, after_seconds(0.5));
      throw ToolInfraError(message("did not answer " + method + " within " + seconds_text(timeout_s) + " s"));
    }
    if (!pending->failure.empty()) throw ToolInfraError(pending->failure);
    return std::move(pending->response);
  }

  // Calls in flight on this process.
  int load() const { return in_flight_.load(); }
  int starts() const { return starts_.load(); }

  void stop() {
    std::lock_guard<std::timed_mutex> start(start_mu_);
    stop_locked();
  }

  // "MCP server 'x' (cmd args): <what>", with the last stderr lines.
  std::string message(const std::string& what) {
    std::string tail;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tail = last_lines(stderr_, kStderrLinesShown);
    }
    return "MCP server " + spec_.describe() + ": " + what +
           (tail.empty() ? std::string("; it wrote nothing to stderr") : "; its last stderr lines:" + tail);
  }

 private:
  struct Pending {
    bool done = false;
    json response;        // the JSON-RPC response
    std::string failure;  // set instead when the process failed
  };

  // Resolves the command (PATH lookup for a bare name), then posix_spawn with the
  // pipes, its own process group (so it and its children can be signalled together)
  // and default signal dispositions.
  void spawn() {
    std::string path = spec_.command;
    if (path.find('/') == std::string::npos) {
      auto it = spec_.env.find("PATH");
      const char* sys_path = std::getenv("PATH");
      const std::string search = it != spec_.env.end() ? it->second
                                 : sys_path != nullptr ? std::string(sys_path)
                                                       : std::string("/usr/local/bin:/usr/bin:/bin");
      std::string found;
      size_t start = 0;
      while (found.empty() && start <= search.size()) {
        size_t end = search.find(':', start);
        if (end == std::string::npos) end = search.size();
        const std::string dir = end > start ? search.substr(start, end - start) : ".";
        if (is_executable_file(dir + "/" + path)) found = dir + "/" + path;
        start = end + 1;
      }
      if (found.empty())
        throw ToolInfraError(message("could not start: command '" + spec_.command + "' not found on PATH (" +
                                     search + "); install it or give its full path in 'command'"));
      path = found;
    } else if (path[0] != '/') {
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd) != nullptr) path = std::string(cwd) + "/" + path;
    }
    if (!is_executable_file(path))
      throw ToolInfraError(message("could not start: '" + path + "' is not an executable file"));
    if (!spec_.cwd.empty()) {
      struct stat st{};
      if (::stat(spec_.cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw ToolInfraError(message("could not start: 'cwd' " + spec_.cwd + " is not a directory"));
    }

    std::vector<std::string> env_strings;
    auto overridden = [&](const std::string& kv) { return spec_.env.count(kv.substr(0, kv.find('='))) > 0; };
    if (spec_.inherit_env) {
      for (char** e = environ; *e != nullptr; ++e)
        if (!overridden(*e)) env_strings.emplace_back(*e);
    } else {
      for (const char* k : {"PATH", "HOME", "LANG", "TMPDIR"}) {
        const char* v = std::getenv(k);
        if (v != nullptr && spec_.env.count(k) == 0) env_strings.push_back(std::string(k) + "=" + v);
      }
    }
    for (const auto& kv : spec_.env) env_strings.push_back(kv.first + "=" + kv.second);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings{spec_.command};
    arg_strings.insert(arg_strings.end(), spec_.args.begin(), spec_.args.end());
    std::vector<char*> argv;
    for (auto& s : arg_strings) argv.push_back(s.data());
    argv.push_back(nullptr);

    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
      throw ToolInfraError(message(std::string("could not start: pipe: ") + std::strerror(errno)));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      const int e = errno;
      ::close(in[0]), ::close(in[1]);
      throw ToolInfraError(message(std::string("could not start: pipe: ") + std::strerror(e)));
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      const int e = errno;
      ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
      throw ToolInfraError(message(std::string("could not start: pipe: ") + std::strerror(e)));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    if (!spec_.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec_.cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
      ::close(in[1]), ::close(out[0]), ::close(err[0]);
      throw ToolInfraError(message("could not start '" + path + "': " + std::strerror(rc)));
    }
    for (int fd : {in[1], out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    {
      std::lock_guard<std::mutex> lock(mu_);
      pid_ = pid;
      reaped_ = false;
      stdin_fd_ = in[1];
      stdout_fd_ = out[0];
      stderr_fd_ = err[0];
      running_ = true;
      ready_ = false;
      dead_reason_.clear();
      stderr_.clear();
      stop_reader_ = false;
    }
    starts_.fetch_add(1);
    reader_ = std::thread([this] { read_loop(); });
  }

  void initialize(Clock::time_point deadline) {
    json params = json::object();
    params["protocolVersion"] = kProtocolVersion;
    params["capabilities"] = json::object();
    params["clientInfo"] = {{"name", "agentr1"}, {"version", "0.1"}};
    const json response = request("initialize", params, deadline, spec_.startup_timeout_s);
    if (response.contains("error"))
      throw ToolInfraError(message("refused initialize: " + dump(response["error"]).substr(0, 300)));
    const json& result = response.contains("result") ? response["result"] : json();
    if (!result.is_object() || !result.contains("protocolVersion") || !result["protocolVersion"].is_string())
      throw ToolInfraError(message("malformed initialize response (no result.protocolVersion): " +
                                   cut(dump(response), 300)));
    const std::string version = result["protocolVersion"].get<std::string>();
    bool known = false;
    for (const char* v : kKnownVersions) known = known || version == v;
    if (!known)
      throw ToolInfraError(message("speaks MCP protocol version " + version + ", which this client does not "
                                   "know (it knows 2024-11-05 .. 2025-11-25)"));
    if (result.contains("capabilities") && result["capabilities"].is_object() &&
        !result["capabilities"].contains("tools")) {
      AGENTR1_LOG(WARN) << "MCP server " << spec_.describe() << " does not declare the 'tools' capability";
    }
    const std::string error = notify("notifications/initialized", json::object(), deadline);
    if (!error.empty()) throw ToolInfraError(message(error));
  }

  std::string notify(const std::string& method, const json& params, Clock::time_point deadline) {
    json msg = json::object();
    msg["jsonrpc"] = "2.0";
    msg["method"] = method;
    msg["params"] = params;
    return send(dump(msg) + "\n", deadline);
  }

  std::string send(const std::string& line, Clock::time_point deadline) {
    std::lock_guard<std::mutex> write(write_mu_);
    int fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd = stdin_fd_;
    }
    if (fd < 0) return "its stdin is closed";
    return write_all(fd, line, deadline);
  }

  // Marks the process dead: every call in flight on it fails with `why` (plus stderr).
  void fail(const std::string& why) {
    const std::string full = message(why);
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) dead_reason_ = why;
    running_ = false;
    ready_ = false;
    for (auto& kv : pending_) {
      kv.second->done = true;
      kv.second->failure = full;
    }
    pending_.clear();
    cv_.notify_all();
  }

  // Reads stdout (JSON-RPC lines) and stderr (kept) until stdout closes, the process
  // breaks the protocol, or stop() asks.
  void read_loop() {
    std::string line_buf;
    bool out_open = true, err_open = true;
    Clock::time_point err_deadline{};
    std::string broken;
    char chunk[65536];
    while (!stop_reader_.load()) {
      pollfd fds[2];
      int n = 0, out_i = -1, err_i = -1;
      if (out_open) fds[out_i = n++] = pollfd{stdout_fd_, POLLIN, 0};
      if (err_open) fds[err_i = n++] = pollfd{stderr_fd_, POLLIN, 0};
      if (n == 0 || (!out_open && Clock::now() > err_deadline)) break;
      const int ready = ::poll(fds, n, 100);
      if (ready == 0 && out_open) {
        // Nothing to read: if the server has exited while something it started still
        // holds its stdout open, no EOF will come; treat its exit as the end of stdout
        // (else every call would wait out its timeout and the process never restart).
        int status = 0;
        if (try_reap(&status)) {
          out_open = false;
          err_deadline = Clock::now() + std::chrono::milliseconds(300);
        }
        continue;
      }
      if (ready <= 0) continue;
      if (err_i >= 0 && fds[err_i].revents != 0) {
        const ssize_t r = ::read(stderr_fd_, chunk, sizeof chunk);
        if (r > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          stderr_.append(chunk, static_cast<size_t>(r));
          if (stderr_.size() > 2 * kStderrKeep) stderr_.erase(0, stderr_.size() - kStderrKeep);
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          err_open = false;
        }
      }
      if (out_i >= 0 && fds[out_i].revents != 0) {
        const ssize_t r = ::read(stdout_fd_, chunk, sizeof chunk);
        if (r > 0) {
          line_buf.append(chunk, static_cast<size_t>(r));
          size_t start = 0, nl;
          while (broken.empty() && (nl = line_buf.find('\n', start)) != std::string::npos) {
            broken = handle_line(line_buf.substr(start, nl - start));
            start = nl + 1;
          }
          line_buf.erase(0, start);
          if (broken.empty() && line_buf.size() > kMaxLineBytes)
            broken = "sent a line over " + std::to_string(kMaxLineBytes >> 20) + " MiB without a newline";
          if (!broken.empty()) break;
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          out_open = false;  // drain stderr a little longer: a crash report comes there
          err_deadline = Clock::now() + std::chrono::milliseconds(300);
        }
      }
    }
    if (stop_reader_.load()) return;
    if (!broken.empty()) {
      fail(broken);
      return;
    }
    // stdout closed: the process is exiting (or has exited); say how, if it is known.
    std::string how = "closed its stdout";
    for (int i = 0; i < 30; ++i) {
      int status = 0;
      if (try_reap(&status)) {
        how = exit_text(status);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    fail(how);
  }

  // One stdout line; returns "" or why the stream is broken.
  std::string handle_line(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return "";
    json msg = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (msg.is_discarded()) return "sent a line that is not JSON (malformed JSON-RPC): " + cut(line, 200);
    if (msg.is_array()) {
      for (const auto& m : msg) {
        std::string why = handle_message(m, line);
        if (!why.empty()) return why;
      }
      return "";
    }
    return handle_message(msg, line);
  }

  std::string handle_message(const json& msg, const std::string& line) {
    if (!msg.is_object()) return "sent a JSON value that is not a JSON-RPC message: " + cut(line, 200);
    if (msg.contains("method")) {
      if (msg.contains("id")) answer_server_request(msg);  // notifications are ignored
      return "";
    }
    if (!msg.contains("id") || (!msg.contains("result") && !msg.contains("error")))
      return "sent a JSON-RPC message with neither method nor id and result/error: " + cut(line, 200);
    if (!msg["id"].is_number_integer()) return "";  // not one of ours (we send integer ids)
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(msg["id"].get<int64_t>());
    if (it == pending_.end()) return "";  // a late answer to a call that timed out
    it->second->done = true;
    it->second->response = msg;
    pending_.erase(it);
    cv_.notify_all();
    return "";
  }

  // We offer no client capabilities: ping gets {}, anything else "method not found".
  void answer_server_request(const json& msg) {
    json reply = json::object();
    reply["jsonrpc"] = "2.0";
    reply["id"] = msg["id"];
    if (msg["method"] == "ping") {
      reply["result"] = json::object();
    } else {
      reply["error"] = {{"code", -32601},
                        {"message", "agentr1's MCP client does not support " + dump(msg["method"])}};
    }
    send(dump(reply) + "\n", after_seconds(1.0));
  }

  bool try_reap(int* status) {
    std::lock_guard<std::mutex> lock(reap_mu_);
    if (reaped_) {
      *status = exit_status_;
      return true;
    }
    const pid_t r = ::waitpid(pid_, &exit_status_, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      reaped_ = true;
      *status = exit_status_;
      return true;
    }
    return false;
  }

  bool wait_exit(Clock::time_point deadline) {
    int status = 0;
    while (!try_reap(&status)) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // Closes stdin (MCP's shutdown), then SIGTERM, then SIGKILL to the process group;
  // reaps the child, joins the reader, fails what is still in flight. start_mu_ held.
  void stop_locked() {
    if (pid_ <= 0) return;
    {
      std::lock_guard<std::mutex> write(write_mu_);
      std::lock_guard<std::mutex> lock(mu_);
      if (stdin_fd_ >= 0) ::close(stdin_fd_);
      stdin_fd_ = -1;
    }
    if (!wait_exit(after_seconds(0.5))) {
      ::kill(-pid_, SIGTERM);
      if (!wait_exit(after_seconds(0.5))) {
        ::kill(-pid_, SIGKILL);
        wait_exit(after_seconds(5.0));
      }
    }
    ::kill(-pid_, SIGKILL);  // anything the server left behind in its group
    stop_reader_ = true;
    if (reader_.joinable()) reader_.join();
    fail("was stopped");
    std::lock_guard<std::mutex> lock(mu_);
    ::close(stdout_fd_);
    ::close(stderr_fd_);
    stdout_fd_ = stderr_fd_ = -1;
    pid_ = -1;
  }

  const McpServerSpec& spec_;
  std::timed_mutex start_mu_;  // serialises start and stop
  std::mutex write_mu_;        // one writer on stdin at a time
  std::mutex reap_mu_;
  std::mutex mu_;              // everything below but the atomics
  std::condition_variable cv_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_status_ = 0;
  int stdin_fd_ = -1, stdout_fd_ = -1, stderr_fd_ = -1;
  bool running_ = false;       // the child runs and its stdout is open
  bool ready_ = false;         // ... and it answered initialize
  std::string dead_reason_;    // why it stopped running
  std::string stderr_;         // its last stderr bytes
  std::map<int64_t, std::shared_ptr<Pending>> pending_;
  int64_t next_id_ = 1;
  std::thread reader_;
  std::atomic<bool> stop_reader_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int> starts_{0};
};

// ---------------------------------------------------------------------------------
// McpServer

McpServer::McpServer(McpServerSpec spec) : spec_(std::move(spec)) {
  with_context("MCP server " + spec_.describe(), [&] { spec_.validate(); });
  for (int i = 0; i < spec_.pool_size; ++i) procs_.push_back(std::make_unique<Process>(spec_));
}

McpServer::~McpServer() { shutdown(); }

void McpServer::shutdown() {
  for (auto& p : procs_) p->stop();
}

int McpServer::starts() const {
  int n = 0;
  for (const auto& p : procs_) n += p->starts();
  return n;
}

McpServer::Process& McpServer::pick() {
  Process* best = procs_[0].get();
  for (const auto& p : procs_)
    if (p->load() < best->load()) best = p.get();
  return *best;
}

std::vector<McpToolInfo> McpServer::list_tools() {
  std::lock_guard<std::mutex> lock(list_mu_);
  if (listed_) return tools_;
  const Clock::time_point deadline = after_seconds(spec_.startup_timeout_s);
  Process& p = *procs_[0];
  p.ensure_started(deadline);
  std::vector<McpToolInfo> tools;
  std::string cursor;
  for (int page = 0;; ++page) {
    if (page >= kMaxListPages)
      throw ToolInfraError(p.message("tools/list did not end after " + std::to_string(kMaxListPages) + " pages"));
    json params = json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    const json response = p.request("tools/list", params, deadline, spec_.startup_timeout_s);
    if (response.contains("error"))
      throw ToolInfraError(p.message("tools/list failed: " + cut(dump(response["error"]), 300)));
    const json& result = response["result"];
    if (!result.is_object() || !result.contains("tools") || !result["tools"].is_array())
      throw ToolInfraError(p.message("malformed tools/list response (no result.tools list): " +
                                     cut(dump(response), 300)));
    for (const json& t : result["tools"]) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
        throw ToolInfraError(p.message("malformed tools/list entry (no name): " + cut(dump(t), 200)));
      McpToolInfo info;
      info.name = t["name"].get<std::string>();
      if (t.contains("description") && t["description"].is_string())
        info.description = t["description"].get<std::string>();
      if (t.contains("inputSchema") && t["inputSchema"].is_object())
        info.input_schema = t["inputSchema"];
      else
        info.input_schema = {{"type", "object"}};
      tools.push_back(std::move(info));
    }
    if (!result.contains("nextCursor") || !result["nextCursor"].is_string() ||
        result["nextCursor"].get<std::string>().empty())
      break;
    cursor = result["nextCursor"].get<std::string>();
  }
  tools_ = tools;
  listed_ = true;
  return tools;
}

McpCallResult McpServer::call_tool(const std::string& name, const json& arguments, double timeout_s) {
  AGENTR1_CHECK(timeout_s > 0, "McpServer::call_tool: timeout_s must be > 0, got " << timeout_s);
  const Clock::time_point deadline = after_seconds(timeout_s);
  Process& p = pick();
  p.ensure_started(deadline);
  json params = json::object();
  params["name"] = name;
  params["arguments"] = arguments.is_null() ? json::object() : arguments;
  const json response = p.request("tools/call", params, deadline, timeout_s);
  McpCallResult out;
  if (response.contains("error")) {
    const json& e = response["error"];
    out.is_error = true;
    out.text = "MCP error";
    if (e.is_object() && e.contains("code")) out.text += " " + dump(e["code"]);
    out.text += ": ";
    out.text += e.is_object() && e.contains("message") && e["message"].is_string()
                    ? e["message"].get<std::string>()
                    : dump(e);
    return out;
  }
  const json& result = response["result"];
  if (!result.is_object())
    throw ToolInfraError(p.message("malformed tools/call response (result is not an object): " +
                                   cut(dump(response), 300)));
  out.is_error = result.contains("isError") && result["isError"].is_boolean() && result["isError"].get<bool>();
  std::vector<std::string> parts;
  if (result.contains("content") && result["content"].is_array()) {
    for (const json& c : result["content"]) {
      const std::string type = c.is_object() && c.contains("type") && c["type"].is_string()
                                   ? c["type"].get<std::string>()
                                   : std::string("unknown");
      if (type == "text" && c.contains("text") && c["text"].is_string()) {
        parts.push_back(c["text"].get<std::string>());
      } else if (type == "image" || type == "audio") {
        parts.push_back("[" + type + " omitted]");
      } else if (type == "resource" && c.contains("resource") && c["resource"].is_object()) {
        const json& r = c["resource"];
        if (r.contains("text") && r["text"].is_string())
          parts.push_back(r["text"].get<std::string>());
        else
          parts.push_back("[resource " + (r.contains("uri") ? dump(r["uri"]) : std::string("(no uri)")) + "]");
      } else if (type == "resource_link") {
        parts.push_back("[resource link " + (c.contains("uri") ? dump(c["uri"]) : std::string("(no uri)")) + "]");
      } else {
        parts.push_back("[" + type + " content omitted]");
      }
    }
  } else if (result.contains("content")) {
    throw ToolInfraError(p.message("malformed tools/call response (content is not a list): " +
                                   cut(dump(response), 300)));
  }
  if (parts.empty() && result.contains("structuredContent")) parts.push_back(dump(result["structuredContent"]));
  for (size_t i = 0; i < parts.size(); ++i) out.text += (i > 0 ? "\n" : "") + parts[i];
  return out;
}

// ---------------------------------------------------------------------------------
// The process-wide registry

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<McpServer>> servers;
  ~Registry() {  // at exit: stop (and reap) every child
    for (auto& kv : servers) kv.second->shutdown();
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

// What makes two specs the same processes (the tool filter and prefix do not).
std::string process_key(const McpServerSpec& s) {
  json k = json::object();
  k["name"] = s.name;
  k["command"] = s.command;
  k["args"] = s.args;
  k["env"] = s.env;
  k["inherit_env"] = s.inherit_env;
  k["cwd"] = s.cwd;
  k["startup_timeout_s"] = s.startup_timeout_s;
  k["pool_size"] = s.pool_size;
  return dump(k);
}

}  // namespace

std::shared_ptr<McpServer> mcp_server(const McpServerSpec& spec) {
  Registry& r = registry();
  const std::string key = process_key(spec);
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.servers.find(key);
  if (it != r.servers.end()) return it->second;
  auto server = std::make_shared<McpServer>(spec);
  r.servers.emplace(key, server);
  return server;
}

void mcp_shutdown_all() {
  std::map<std::string, std::shared_ptr<McpServer>> servers;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    servers.swap(r.servers);
  }
  for (auto& kv : servers) kv.second->shutdown();
}

// ---------------------------------------------------------------------------------
// Tools

McpTool::McpTool(std::shared_ptr<McpServer> server, McpToolInfo info, std::string name, double timeout_s)
    : server_(std::move(server)), info_(std::move(info)), name_(std::move(name)), timeout_s_(timeout_s) {}

ToolResult McpTool::execute(const json& args) {
  McpCallResult r = server_->call_tool(info_.name, args, timeout_s_);
  if (r.is_error) throw Error(r.text.empty() ? "the MCP server reported an error without a message" : r.text);
  ToolResult out;
  out.text = std::move(r.text);
  out.info["mcp_server"] = server_->spec().name;
  return out;
}

std::vector<std::shared_ptr<Tool>> make_mcp_tools(const McpServerSpec& spec, double default_timeout_s) {
  std::shared_ptr<McpServer> server = mcp_server(spec);
  const std::vector<McpToolInfo> infos = server->list_tools();
  const double timeout = spec.call_timeout_s > 0 ? spec.call_timeout_s : default_timeout_s;
  std::vector<std::shared_ptr<Tool>> tools;
  for (const auto& name : spec.tools) {
    bool found = false;
    for (const auto& i : infos) found = found || i.name == name;
    if (!found) {
      std::string known;
      for (const auto& i : infos) known += (known.empty() ? "" : ", ") + i.name;
      throw Error("MCP server " + spec.describe() + " has no tool '" + name + "' (listed in its 'tools'); it has: " +
                  (known.empty() ? std::string("(none)") : known));
    }
  }
  for (const auto& info : infos) {
    if (!spec.tools.empty() && std::find(spec.tools.begin(), spec.tools.end(), info.name) == spec.tools.end())
      continue;
    tools.push_back(std::make_shared<McpTool>(server, info, spec.prefix_tools ? spec.name + "__" + info.name : info.name,
                                              timeout));
  }
  return tools;
}

}  // namespace agentr1::env
