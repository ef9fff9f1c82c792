// MCP client tools (env/mcp.h): against a real MCP server that no one here wrote
// (@modelcontextprotocol/server-everything, pinned in tests/ref/package.json, run by
// node), and against an in-test fake server (a python3 script written by the test) for
// the failures: a crash mid-call, a slow call, malformed JSON, a missing command, a
// server that dies or hangs at start, isError results, paginated tools/list.
#include "agentr1/env/mcp.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/error.h"
#include "agentr1/core/testing.h"
#include "agentr1/core/thread_pool.h"
#include "agentr1/env/tool_env.h"
#include "agentr1/text/tokenizer/tokenizer.h"

namespace agentr1::env {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using agentr1::testing::error_of;

const std::string kRefDir = AGENTR1_REF_DIR;
const std::string kEverything = kRefDir + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
const char kSetupHint[] = "; run `bash scripts/setup.sh` (installs node and the tests/ref packages)";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The message of the ToolInfraError fn() throws; "" if it throws nothing; any other
// exception is reported as "(not a ToolInfraError) ..." so the expectation fails.
template <class Fn>
std::string infra_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ToolInfraError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not a ToolInfraError) ") + e.what();
  }
  return "";
}

McpServerSpec everything_spec(const std::string& name) {
  McpServerSpec s;
  s.name = name;
  s.command = "node";
  s.args = {kEverything, "stdio"};
  s.env = {{"AGENTR1_MCP_TEST", "from-spec"}};
  return s;
}

void require_everything() {
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not installed" << kSetupHint;
  ASSERT_TRUE(fs::exists(kEverything)) << kEverything << " is missing" << kSetupHint;
}

// The fake: newline-delimited JSON-RPC on stdin/stdout, each tools/call on its own thread
// (so a slow call does not hold up the next). Its first argument picks the start-up
// behaviour: serve | exit_at_start | never_answer.
const char kFakeServer[] = R"PY(
import json, os, sys, threading, time
mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
if mode == "exit_at_start":
    sys.stderr.write("fake: fatal: FAKE_API_KEY is not set\n"); sys.stderr.flush(); sys.exit(1)
lock = threading.Lock()
def send(msg):
    with lock:
        sys.stdout.write(json.dumps(msg) + "\n"); sys.stdout.flush()
def text(s, is_error=False):
    return {"content": [{"type": "text", "text": s}], "isError": is_error}
PAGES = [[{"name": "ok", "description": "Answers ok.", "inputSchema": {"type": "object"}},
          {"name": "slow", "description": "Sleeps.", "inputSchema": {"type": "object"}},
          {"name": "crash", "description": "Dies."},
          {"name": "garbage", "description": "Writes a line that is not JSON."}],
         [{"name": "fails", "description": "isError."},
          {"name": "mixed", "description": "Text and an image."},
          {"name": "pid", "description": "Its process id."}]]
def call(req):
    p = req["params"]; name = p["name"]; args = p.get("arguments", {})
    if name == "ok": send({"jsonrpc": "2.0", "id": req["id"], "result": text("ok " + json.dumps(args, sort_keys=True))})
    elif name == "slow":
        time.sleep(args.get("seconds", 5)); send({"jsonrpc": "2.0", "id": req["id"], "result": text("slept")})
    elif name == "crash":
        sys.stderr.write("fake: crashing on purpose\n"); sys.stderr.flush(); os._exit(3)
    elif name == "crash_leaving_child":  # a helper it started keeps stdout open (unlisted)
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        os._exit(4)
    elif name == "garbage":
        with lock:
            sys.stdout.write("this is not json\n"); sys.stdout.flush()
    elif name == "fails": send({"jsonrpc": "2.0", "id": req["id"], "result": text("no such city: Atlantis", True)})
    elif name == "mixed":
        send({"jsonrpc": "2.0", "id": req["id"], "result": {"content": [
            {"type": "text", "text": "a chart:"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}})
    elif name == "pid": send({"jsonrpc": "2.0", "id": req["id"], "result": text(str(os.getpid()))})
    else: send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32602, "message": "Unknown tool: " + name}})
for line in sys.stdin:
    req = json.loads(line)
    m = req.get("method")
    if "id" not in req: continue
    if m == "initialize":
        if mode == "never_answer": continue
        sys.stderr.write("fake: started\n"); sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": req["id"], "result": {"protocolVersion": req["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}})
        send({"jsonrpc": "2.0", "id": 99, "method": "roots/list"})  # a server->client request
    elif m == "tools/list":
        page = int(req["params"].get("cursor", "0"))
        result = {"tools": PAGES[page]}
        if page + 1 < len(PAGES): result["nextCursor"] = str(page + 1)
        send({"jsonrpc": "2.0", "id": req["id"], "result": result})
    elif m == "tools/call": threading.Thread(target=call, args=(req,), daemon=True).start()
)PY";

const std::string& fake_script() {
  static const std::string path = [] {
    const std::string p = ::testing::TempDir() + "/agentr1_fake_mcp_" + std::to_string(::getpid()) + ".py";
    std::ofstream(p) << kFakeServer;
    return p;
  }();
  return path;
}

McpServerSpec fake_spec(const std::string& name, const std::string& mode = "serve") {
  McpServerSpec s;
  s.name = name;
  s.command = AGENTR1_PYTHON;
  s.args = {"-u", fake_script(), mode};
  s.pool_size = 1;
  s.startup_timeout_s = 10;
  return s;
}

// For ToolEnv episodes: the tiny Qwen3 tokenizer and its chat template (tool_env_test's).
const text::Tokenizer& tok() {
  static const text::Tokenizer t =
      text::Tokenizer::load(std::string(AGENTR1_SOURCE_DIR) + "/tests/fixtures/flow/tiny_qwen3");
  return t;
}

EnvContext env_context(ThreadPool* pool) {
  static const text::ChatTemplate tmpl = text::ChatTemplate::from_template_text(tok().chat_template());
  EnvContext ctx;
  ctx.tokenizer = &tok();
  ctx.chat_template = &tmpl;
  ctx.pool = pool;
  return ctx;
}

// The model's response `text`, ended by <|im_end|>.
Action response(const std::string& text) {
  Action a;
  a.ids = tok().encode(text, true);
  a.ids.push_back(*tok().token_to_id("<|im_end|>"));
  a.text = action_text(tok(), a.ids);
  return a;
}

// ---------------------------------------------------------------------------------
// Options

TEST(McpSpec, FromJsonAndErrors) {
  const McpServerSpec s = McpServerSpec::from_json(
      json::parse(R"({"name": "search", "command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}})"));
  EXPECT_EQ(s.name, "search");
  EXPECT_EQ(s.args, (std::vector<std::string>{"-y", "pkg"}));
  EXPECT_EQ(s.env.at("K"), "v");
  EXPECT_EQ(s.pool_size, 2);
  EXPECT_EQ(McpServerSpec::from_json(s.to_json()).to_json(), s.to_json());
  EXPECT_EQ(s.describe(), "'search' (npx -y pkg)");

  std::string msg = error_of([] { McpServerSpec::from_json(json{{"command", "npx"}}); });
  EXPECT_TRUE(contains(msg, "mcp_server: 'name' is required")) << msg;
  msg = error_of([] { McpServerSpec::from_json(json{{"name", "a b"}, {"command", "x"}}); });
  EXPECT_TRUE(contains(msg, "use letters, digits, _ and - only")) << msg;
  msg = error_of([] { McpServerSpec::from_json(json{{"name", "s"}, {"command", ""}}); });
  EXPECT_TRUE(contains(msg, "'command' of MCP server 's' is empty")) << msg;

  // Inside ToolEnvOptions: the keys are env_kwargs.mcp_servers[i].<field>.
  msg = error_of([] {
    ToolEnvOptions::from_json(json::parse(R"({"mcp_servers": [{"name": "s", "command": "x", "pool_sise": 2}]})"));
  });
  EXPECT_TRUE(contains(msg, "env_kwargs.mcp_servers[0].pool_sise")) << msg;
  EXPECT_TRUE(contains(msg, "pool_size")) << msg;
  msg = error_of([] {
    ToolEnvOptions::from_json(json::parse(R"({"mcp_servers": [{"name": "s", "command": "x", "pool_size": 0}]})"));
  });
  EXPECT_TRUE(contains(msg, "env_kwargs.mcp_servers[0]: 'pool_size' must be in 1..64 (processes), got 0")) << msg;
  msg = error_of([] {
    ToolEnvOptions::from_json(json::parse(
        R"({"mcp_servers": [{"name": "s", "command": "x"}, {"name": "s", "command": "y"}]})"));
  });
  EXPECT_TRUE(contains(msg, "'mcp_servers' names 's' twice")) << msg;
  const ToolEnvOptions o = ToolEnvOptions::from_json(
      json::parse(R"({"mcp_servers": [{"name": "s", "command": "x", "tools": ["a"]}]})"));
  ASSERT_EQ(o.mcp_servers.size(), 1u);
  EXPECT_EQ(ToolEnvOptions::from_json(o.to_json()).to_json(), o.to_json());
}

// ---------------------------------------------------------------------------------
// The real server

TEST(McpEverything, HandshakeListCall) {
  require_everything();
  std::shared_ptr<McpServer> server = mcp_server(everything_spec("everything"));
  EXPECT_EQ(mcp_server(everything_spec("everything")), server) << "one server per spec and process";
  const std::vector<McpToolInfo> tools = server->list_tools();
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t.name);
  for (const char* want : {"echo", "get-sum", "get-env", "get-tiny-image"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& t : tools)
    if (t.name == "get-sum") {
      EXPECT_EQ(t.input_schema["type"], "object");
      EXPECT_TRUE(t.input_schema["properties"].contains("a")) << t.input_schema.dump();
      EXPECT_FALSE(t.description.empty());
    }

  McpCallResult r = server->call_tool("echo", {{"message", "hi there"}}, 10);
  EXPECT_FALSE(r.is_error);
  EXPECT_EQ(r.text, "Echo: hi there");
  r = server->call_tool("get-sum", {{"a", 2}, {"b", 3}}, 10);
  EXPECT_EQ(r.text, "The sum of 2 and 3 is 5.");
  r = server->call_tool("get-tiny-image", json::object(), 10);
  EXPECT_TRUE(contains(r.text, "[image omitted]")) << r.text;
  r = server->call_tool("get-env", json::object(), 10);  // the spec's env reaches the server
  EXPECT_TRUE(contains(r.text, "\"AGENTR1_MCP_TEST\": \"from-spec\"") ||
              contains(r.text, "\"AGENTR1_MCP_TEST\":\"from-spec\""))
      << r.text.substr(0, 300);
  // Bad arguments are the model's error, not the infrastructure's.
  r = server->call_tool("echo", json::object(), 10);
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(contains(r.text, "message")) << r.text;
  r = server->call_tool("no-such-tool", json::object(), 10);
  EXPECT_TRUE(r.is_error);
  EXPECT_TRUE(contains(r.text, "no-such-tool")) << r.text;
  EXPECT_EQ(server->starts(), 1);
}

TEST(McpEverything, ConcurrentCallsShareThePool) {
  require_everything();
  McpServerSpec spec = everything_spec("everything_pool");
  spec.pool_size = 2;
  std::shared_ptr<McpServer> server = mcp_server(spec);
  std::atomic<int> wrong{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const std::string m = "t" + std::to_string(t) + "-" + std::to_string(i);
        try {
          if (server->call_tool("echo", {{"message", m}}, 20).text != "Echo: " + m) ++wrong;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
          ++wrong;
        }
        ++done;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(done.load(), 48);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(server->starts(), 1);
  EXPECT_LE(server->starts(), 2) << "the pool has two processes, none restarted";
}

TEST(McpEverything, ToolEnvEpisodeCallsAnMcpTool) {
  require_everything();
  ThreadPool pool(2);
  const EnvContext ctx = env_context(&pool);
  const ToolEnvOptions o = ToolEnvOptions::from_json(json::parse(
      R"({"tool_timeout_s": 20, "mcp_servers": [{"name": "everything", "command": "node", "args": [")" +
      kEverything + R"(", "stdio"], "prefix_tools": true, "tools": ["get-sum", "echo"]}]})"));
  ToolEnv env(ctx, o);
  ASSERT_TRUE(env.tools_schema().is_array());
  ASSERT_EQ(env.tools_schema().size(), 2u) << env.tools_schema().dump();
  EXPECT_EQ(env.tools_schema()[0]["function"]["name"], "everything__echo");  // the server's order
  EXPECT_EQ(env.tools_schema()[1]["function"]["name"], "everything__get-sum");
  EXPECT_EQ(env.tools_schema()[1]["function"]["parameters"]["properties"]["a"]["type"], "number");

  Sample s;
  s.prompt = json::array({json{{"role", "user"}, {"content", "What is 2 + 3?"}}});
  const Observation first = env.reset(s);
  EXPECT_TRUE(contains(tok().decode(first.tokens()), "everything__get-sum"));
  const StepResult r = env.step(response(
      "<tool_call>\n{\"name\": \"everything__get-sum\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>"));
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.info["tool_errors"], 0) << r.info.dump();
  const std::string next = tok().decode(r.observation.tokens());
  EXPECT_TRUE(contains(next, "<tool_response>\nThe sum of 2 and 3 is 5.\n</tool_response>")) << next;

  // A name the server does not have fails at construction, naming the ones it has.
  const std::string msg = error_of([&] {
    ToolEnv bad(ctx, ToolEnvOptions::from_json(json::parse(
                         R"({"mcp_servers": [{"name": "everything", "command": "node", "args": [")" +
                         kEverything + R"(", "stdio"], "tools": ["get-product"]}]})")));
  });
  EXPECT_TRUE(contains(msg, "has no tool 'get-product'")) << msg;
  EXPECT_TRUE(contains(msg, "get-sum")) << msg;
}

// ---------------------------------------------------------------------------------
// The fake: failures

TEST(McpFake, PaginatedListMixedContentAndServerErrors) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_list"));
  std::vector<std::string> names;
  for (const auto& t : server->list_tools()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ok", "slow", "crash", "garbage", "fails", "mixed", "pid"}));
  EXPECT_EQ(server->list_tools()[2].input_schema, json::parse(R"({"type": "object"})"));  // absent -> object

  EXPECT_EQ(server->call_tool("ok", {{"x", 1}}, 5).text, "ok {\"x\": 1}");
  EXPECT_EQ(server->call_tool("mixed", json::object(), 5).text, "a chart:\n[image omitted]");
  McpCallResult r = server->call_tool("fails", json::object(), 5);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.text, "no such city: Atlantis");
  r = server->call_tool("nope", json::object(), 5);
  EXPECT_TRUE(r.is_error);
  EXPECT_EQ(r.text, "MCP error -32602: Unknown tool: nope");

  // As env::Tools: isError is an ordinary tool error (agentr1::Error), not infrastructure.
  McpServerSpec spec = fake_spec("fake_list");
  spec.tools = {"fails", "ok"};
  spec.prefix_tools = true;
  std::vector<std::shared_ptr<Tool>> tools = make_mcp_tools(spec, 5);
  ASSERT_EQ(tools.size(), 2u);
  EXPECT_EQ(tools[0]->name(), "fake_list__ok");
  EXPECT_EQ(tools[1]->name(), "fake_list__fails");
  EXPECT_EQ(tools[0]->execute({{"y", 2}}).text, "ok {\"y\": 2}");
  bool plain_error = false;
  try {
    tools[1]->execute(json::object());
  } catch (const ToolInfraError&) {
  } catch (const Error& e) {
    plain_error = contains(e.what(), "no such city");
  }
  EXPECT_TRUE(plain_error);
  EXPECT_EQ(server->starts(), 1) << "the server answered roots/list's refusal and kept going";
}

TEST(McpFake, CrashMidCallIsInfraErrorAndRestarts) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_crash"));
  const std::string pid1 = server->call_tool("pid", json::object(), 5).text;
  const std::string msg = infra_error_of([&] { server->call_tool("crash", json::object(), 5); });
  EXPECT_TRUE(contains(msg, "MCP server 'fake_crash'")) << msg;
  EXPECT_TRUE(contains(msg, "exited with status 3")) << msg;
  EXPECT_TRUE(contains(msg, "fake: crashing on purpose")) << msg;
  const std::string pid2 = server->call_tool("pid", json::object(), 5).text;  // restarted
  EXPECT_NE(pid1, pid2);
  EXPECT_EQ(server->starts(), 2);
}

// A server that dies while a process it started still holds its stdout: no EOF comes,
// but its exit is noticed, the call fails at once and the next call restarts it.
TEST(McpFake, CrashLeavingAChildHoldingStdoutIsNoticed) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_crash_child"));
  const std::string pid1 = server->call_tool("pid", json::object(), 5).text;
  const auto t0 = Clock::now();
  const std::string msg = infra_error_of([&] { server->call_tool("crash_leaving_child", json::object(), 8); });
  EXPECT_LT(seconds_since(t0), 4.0) << "the call waited for its timeout: " << msg;
  EXPECT_TRUE(contains(msg, "exited with status 4")) << msg;
  const std::string pid2 = server->call_tool("pid", json::object(), 5).text;  // restarted
  EXPECT_NE(pid1, pid2);
  EXPECT_EQ(server->starts(), 2);
}

TEST(McpFake, SlowCallTimesOutAndTheServerStaysUsable) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_slow"));
  server->list_tools();
  const auto t0 = Clock::now();
  const std::string msg = infra_error_of([&] { server->call_tool("slow", {{"seconds", 5}}, 0.3); });
  EXPECT_LT(seconds_since(t0), 1.5);
  EXPECT_TRUE(contains(msg, "did not answer tools/call within 0.3 s")) << msg;
  EXPECT_EQ(server->call_tool("ok", json::object(), 5).text, "ok {}");
  EXPECT_EQ(server->starts(), 1);
}

TEST(McpFake, MalformedJsonIsInfraErrorAndRestarts) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_garbage"));
  const std::string msg = infra_error_of([&] { server->call_tool("garbage", json::object(), 5); });
  EXPECT_TRUE(contains(msg, "sent a line that is not JSON (malformed JSON-RPC): this is not json")) << msg;
  EXPECT_EQ(server->call_tool("ok", json::object(), 5).text, "ok {}");
  EXPECT_EQ(server->starts(), 2);
}

TEST(McpFake, StartupFailuresAreClear) {
  McpServerSpec missing = fake_spec("fake_missing");
  missing.command = "agentr1-no-such-mcp-server";
  std::string msg = infra_error_of([&] { mcp_server(missing)->list_tools(); });
  EXPECT_TRUE(contains(msg, "MCP server 'fake_missing' (agentr1-no-such-mcp-server")) << msg;
  EXPECT_TRUE(contains(msg, "command 'agentr1-no-such-mcp-server' not found on PATH")) << msg;

  msg = infra_error_of([&] { mcp_server(fake_spec("fake_exit", "exit_at_start"))->list_tools(); });
  EXPECT_TRUE(contains(msg, "exited with status 1")) << msg;
  EXPECT_TRUE(contains(msg, "fake: fatal: FAKE_API_KEY is not set")) << msg;
  EXPECT_TRUE(contains(msg, AGENTR1_PYTHON)) << msg;

  McpServerSpec hang = fake_spec("fake_hang", "never_answer");
  hang.startup_timeout_s = 0.5;
  const auto t0 = Clock::now();
  msg = infra_error_of([&] { mcp_server(hang)->call_tool("ok", json::object(), 5); });
  EXPECT_LT(seconds_since(t0), 3.0);
  EXPECT_TRUE(contains(msg, "did not answer initialize within 0.5 s")) << msg;
}

TEST(McpFake, InfraErrorReachesTheModelThroughToolEnv) {
  ThreadPool pool(2);
  const EnvContext ctx = env_context(&pool);
  ToolEnvOptions o;
  o.mcp_servers = {fake_spec("fake_env")};
  ToolEnv env(ctx, o);
  Sample s;
  s.prompt = json::array({json{{"role", "user"}, {"content", "go"}}});
  env.reset(s);
  const StepResult r = env.step(response("<tool_call>\n{\"name\": \"crash\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(r.done);
  EXPECT_EQ(r.info["tool_errors"], 1) << r.info.dump();
  EXPECT_EQ(r.info["infra_failures"], 1) << r.info.dump();  // not the model's fault: the trajectory is marked
  EXPECT_TRUE(r.info.contains("infra_error")) << r.info.dump();
  EXPECT_EQ(r.info["calls"][0]["status"], "infra_error") << r.info.dump();
  const std::string next = tok().decode(r.observation.tokens());
  EXPECT_TRUE(contains(next, "exited with status 3")) << next;
}

TEST(McpFake, ShutdownReapsTheChildren) {
  std::shared_ptr<McpServer> server = mcp_server(fake_spec("fake_reap"));
  const pid_t pid = std::stoi(server->call_tool("pid", json::object(), 5).text);
  EXPECT_EQ(::kill(pid, 0), 0);
  const auto t0 = Clock::now();
  mcp_shutdown_all();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(::kill(pid, 0), -1) << "the child must be gone and reaped";
  EXPECT_EQ(errno, ESRCH);
  // A later call starts it again.
  EXPECT_EQ(server->call_tool("ok", json::object(), 5).text, "ok {}");
  server->shutdown();
}

}  // namespace
}  // namespace agentr1::env
