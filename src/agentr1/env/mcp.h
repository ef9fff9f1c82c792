// agentr1/env/mcp.h — Model Context Protocol client tools (stdio transport).
//
//   McpServerSpec spec = McpServerSpec::from_json(
//       {{"name", "everything"}, {"command", "npx"},
//        {"args", {"-y", "@modelcontextprotocol/server-everything"}}});
//   std::shared_ptr<McpServer> server = mcp_server(spec);   // process-wide, started lazily
//   std::vector<McpToolInfo> tools = server->list_tools();  // tools/list, all pages
//   McpCallResult r = server->call_tool("echo", {{"message", "hi"}}, /*timeout_s=*/5);
//   // r.text == "Echo: hi", r.is_error == false
//
//   // As env::Tools (what ToolEnv does with env_kwargs.mcp_servers):
//   for (auto& t : make_mcp_tools(spec, /*default_timeout_s=*/5)) ...   // t->execute(args)
//
// Transport: the server is a child process; JSON-RPC 2.0 messages, one per line, go to
// its stdin and come from its stdout; its stderr is kept (the last 16 KiB) for error
// messages. Each process is initialised once (initialize, then notifications/initialized).
// Requests are matched to responses by id, so one process serves many calls at once;
// McpServerSpec.pool_size processes share the calls (the least busy one takes the next).
// Requests from the server to the client are answered "method not found" (ping: {});
// notifications are ignored.
//
// Lifetime: mcp_server(spec) keeps one McpServer per distinct spec for the whole process
// (every ToolEnv of a trainer shares it); its processes start on first use. A process
// that dies (or writes something that is not JSON-RPC) fails the calls in flight on it
// and is restarted by the next call that picks it. At exit (or mcp_shutdown_all()) each
// child gets its stdin closed, then SIGTERM, then SIGKILL (to its process group), and is
// reaped. Every wait has a deadline: startup_timeout_s for spawn + initialize, the call's
// timeout for a call.
//
// Errors: anything that is the infrastructure's fault (the command is missing, the
// server never answered initialize, it died, it timed out, it sent malformed JSON-RPC)
// throws ToolInfraError naming the server, its command and the last stderr lines. A
// call the server answers as an error (result.isError, or a JSON-RPC error such as
// "unknown tool" / "invalid params") is the model's problem: McpCallResult.is_error,
// and McpTool::execute throws a plain agentr1::Error with the server's text (ToolEnv
// shows it to the model as the tool's error).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentr1/core/json.h"
#include "agentr1/env/tool.h"

namespace agentr1::env {

// One MCP server: how to start it and which of its tools to offer. An element of
// env_kwargs.mcp_servers (ToolEnvOptions).
struct McpServerSpec {
  std::string name;                         // short name for messages and the tool prefix
                                            // (letters, digits, _ and -); required
  std::string command;                      // executable: a path, or a name looked up on PATH
  std::vector<std::string> args;            // its arguments
  std::map<std::string, std::string> env;   // variables set for the server (on top of the
                                            // trainer's environment when inherit_env)
  bool inherit_env = true;                  // start from the trainer's environment; false:
                                            // only PATH, HOME, LANG, TMPDIR and `env`
  std::string cwd;                          // working directory ("" = the trainer's)
  double startup_timeout_s = 30.0;          // spawn + initialize (+ the first tools/list); > 0
  double call_timeout_s = 0.0;              // limit of one tools/call; 0 = just under the env's
                                            // tool_timeout_s (max(t/2, t - 0.5 s)), so the
                                            // server's silence is an infra failure
                                            // tool_timeout_s; >= 0
  int pool_size = 2;                        // processes sharing the calls; 1..64
  bool prefix_tools = false;                // offer tools as "<name>__<tool>" (avoids clashes)
  std::vector<std::string> tools;           // the server's tools to offer, by its names;
                                            // [] = all it lists

  template <class V>
  void visit(V& v) {
    v.field("name", name, "short name of the server (messages, tool prefix)");
    v.field("command", command, "executable to start (a path, or a name on PATH)");
    v.field("args", args, "its arguments");
    v.field("env", env, "environment variables set for the server");
    v.field("inherit_env", inherit_env,
            "start from the trainer's environment (false: PATH, HOME, LANG, TMPDIR only)");
    v.field("cwd", cwd, "working directory of the server (\"\" = the trainer's)");
    v.field("startup_timeout_s", startup_timeout_s, "limit on start + initialize, seconds");
    v.field("call_timeout_s", call_timeout_s, "limit of one tool call, seconds; 0 = just under tool_timeout_s");
    v.field("pool_size", pool_size, "server processes sharing the calls");
    v.field("prefix_tools", prefix_tools, "offer tools as <name>__<tool>");
    v.field("tools", tools, "the server's tools to offer; [] = all");
  }
  // Throws Error naming the field, the rule, the value and how to fix it.
  void validate() const;
  // Bound with bind_into; errors name `key` (e.g. "env_kwargs.mcp_servers[0]") and the field.
  static McpServerSpec from_json(const json& j, const std::string& key = "mcp_server");
  json to_json() const;
  // "name (command arg ...)", for messages.
  std::string describe() const;
};

// One tool as tools/list describes it.
struct McpToolInfo {
  std::string name;
  std::string description;
  json input_schema = json::object();  // JSON schema of the arguments ({"type": "object"} if absent)
};

// The outcome of a tools/call the server answered.
struct McpCallResult {
  std::string text;     // text contents joined by "\n"; other contents as "[image omitted]",
                        // "[audio omitted]", "[resource <uri>]"; structuredContent (JSON)
                        // when there is no content; a JSON-RPC error as "MCP error <code>: <msg>"
  bool is_error = false;  // result.isError, or a JSON-RPC error response
};

// The processes of one server (see the top of this file). Thread-safe.
class McpServer {
 public:
  explicit McpServer(McpServerSpec spec);  // starts nothing
  ~McpServer();                            // shutdown()
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  const McpServerSpec& spec() const { return spec_; }
  // All tools (following nextCursor), asked of the first process; cached after the first
  // success. Starts that process if needed. Throws ToolInfraError.
  std::vector<McpToolInfo> list_tools();
  // tools/call on the least busy process (started or restarted first if needed; a
  // restart is bounded by startup_timeout_s, the call itself by timeout_s > 0). Throws
  // ToolInfraError on a transport failure; the server's own errors are in the result.
  McpCallResult call_tool(const std::string& name, const json& arguments, double timeout_s);
  // Stops every process (stdin closed, SIGTERM, SIGKILL; reaped). Later calls restart them.
  void shutdown();
  // Processes started so far (restarts included), for tests and logs.
  int starts() const;

  class Process;  // one child (mcp.cpp)

 private:
  Process& pick();
  McpServerSpec spec_;
  std::vector<std::unique_ptr<Process>> procs_;
  std::mutex list_mu_;  // guards tools_, listed_
  std::vector<McpToolInfo> tools_;
  bool listed_ = false;
};

// The process-wide McpServer for this spec (one per distinct name, command, args, env,
// inherit_env, cwd, startup_timeout_s and pool_size), created on first use and stopped at
// exit.
std::shared_ptr<McpServer> mcp_server(const McpServerSpec& spec);
// Stops and forgets every server of the registry (tests; exit does it too).
void mcp_shutdown_all();

// One MCP tool as an env::Tool: `name` as offered to the model (make_mcp_tools: the
// server's name for it, prefixed when spec.prefix_tools), its description, its input
// schema as parameters; execute() calls it with `timeout_s`. Thread-safe.
class McpTool : public Tool {
 public:
  McpTool(std::shared_ptr<McpServer> server, McpToolInfo info, std::string name, double timeout_s);
  std::string name() const override { return name_; }
  std::string description() const override { return info_.description; }
  json parameters() const override { return info_.input_schema; }
  // The result text (info {"mcp_server": name}); a server-side error throws Error with its
  // text; a transport failure throws ToolInfraError.
  ToolResult execute(const json& args) override;

 private:
  std::shared_ptr<McpServer> server_;
  McpToolInfo info_;
  std::string name_;
  double timeout_s_;
};

// The spec's tools (its `tools` allow-list, in the server's order) from the process-wide
// server. Each call's limit is spec.call_timeout_s, or default_timeout_s when that is 0.
// Throws ToolInfraError when the server cannot be started or listed, Error when an
// allow-listed name is not among its tools (naming the ones it has).
std::vector<std::shared_ptr<Tool>> make_mcp_tools(const McpServerSpec& spec, double default_timeout_s);

}  // namespace agentr1::env
