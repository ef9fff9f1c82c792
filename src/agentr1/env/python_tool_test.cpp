// The python tool end to end on this machine: plain success, session and fresh state,
// recovery after a timeout, each containment case as a clear tool error (the test
// process goes on), infrastructure failures as ToolInfraError, and cleanup.
#include "agentr1/env/python_tool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "agentr1/core/testing.h"

namespace agentr1::env {
namespace {

namespace fs = std::filesystem;
using agentr1::testing::error_of;

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

class PythonToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    root_ = (fs::temp_directory_path() / ("agentr1-pytool-test-" + std::to_string(rd()))).string();
  }
  void TearDown() override {
    std::error_code ec;
    // The sandboxed processes run with the scratch dir as cwd: none may survive.
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cwd = fs::read_symlink(e.path() / "cwd", ec).string();
      EXPECT_FALSE(!ec && cwd.rfind(root_, 0) == 0) << "process " << name << " outlived its sandbox";
    }
    if (!root_.empty()) {
      EXPECT_TRUE(!fs::exists(root_) || fs::is_empty(root_)) << "a scratch dir was left behind";
      fs::remove_all(root_, ec);
    }
  }
  PythonToolOptions opts(const std::string& mode = "fresh") {
    PythonToolOptions o;
    o.mode = mode;
    o.scratch_root = root_;
    o.timeout_s = 10;  // generous; the timeout tests set a short one
    return o;
  }
  static ToolResult run(PythonTool& t, const std::string& code) { return t.execute({{"code", code}}); }
  std::string root_;
};

TEST_F(PythonToolTest, PrintsAResult) {
  PythonTool t(opts());
  ToolResult r = run(t, "print(2+3)");
  EXPECT_EQ(r.text, "5\n");
  EXPECT_EQ(r.info["error"], false);
  EXPECT_EQ(r.info["exit_code"], 0);
  r = run(t, "x = 1");
  EXPECT_EQ(r.text, "(no output; use print() to see values)");
}

TEST_F(PythonToolTest, FreshModeKeepsFilesButNotVariables) {
  PythonTool t(opts("fresh"));
  EXPECT_EQ(run(t, "x = 41\nopen('note.txt', 'w').write('kept')").info["error"], false);
  ToolResult r = run(t, "print(x)");
  EXPECT_TRUE(contains(r.text, "NameError: name 'x' is not defined")) << r.text;
  EXPECT_EQ(r.info["error_kind"], "exception");
  EXPECT_FALSE(contains(r.text, "_agentr1_driver")) << "the driver's frames must not show: " << r.text;
  EXPECT_EQ(run(t, "print(open('note.txt').read())").text, "kept\n");
}

TEST_F(PythonToolTest, SessionModeKeepsState) {
  PythonTool t(opts("session"));
  EXPECT_EQ(run(t, "x = 41\ndef f(y):\n    return y + 1").text, "(no output; use print() to see values)");
  EXPECT_EQ(run(t, "print(f(x))").text, "42\n");
  ToolResult r = run(t, "1/0");
  EXPECT_TRUE(contains(r.text, "ZeroDivisionError")) << r.text;
  EXPECT_TRUE(contains(r.text, "1/0")) << "the cell's source line is shown: " << r.text;
  EXPECT_EQ(run(t, "print(x)").text, "41\n") << "an exception does not lose the state";
  r = run(t, "import sys; sys.exit(2)");
  EXPECT_TRUE(contains(r.text, "exit with status 2")) << r.text;
  EXPECT_EQ(run(t, "print(x)").text, "41\n") << "exit() in a cell does not end the session";
}

TEST_F(PythonToolTest, SessionRecoversAfterATimeout) {
  PythonToolOptions o = opts("session");
  o.timeout_s = 1.5;
  PythonTool t(o);
  EXPECT_EQ(run(t, "x = 7\nprint(x)").text, "7\n");
  pid_t first = t.session_pid();
  ASSERT_GT(first, 0);
  ToolResult r = run(t, "print('spinning', flush=True)\nwhile True: pass");
  EXPECT_TRUE(contains(r.text, "spinning\n")) << r.text;
  EXPECT_TRUE(contains(r.text, "Error: timed out after 1.5 s; the process group was killed.")) << r.text;
  EXPECT_TRUE(contains(r.text, "state is lost")) << r.text;
  EXPECT_EQ(r.info["error_kind"], "timeout");
  EXPECT_NE(::kill(first, 0), 0) << "the timed-out interpreter is gone";
  r = run(t, "print(x)");
  EXPECT_TRUE(contains(r.text, "Note: a fresh interpreter was started")) << r.text;
  EXPECT_TRUE(contains(r.text, "NameError")) << r.text;
  EXPECT_EQ(r.info["session_restarted"], true);
  EXPECT_EQ(run(t, "x = 8").info["error"], false);
  EXPECT_EQ(run(t, "print(x)").text, "8\n");
}

TEST_F(PythonToolTest, InfiniteLoopInFreshMode) {
  PythonToolOptions o = opts();
  o.timeout_s = 1.5;
  PythonTool t(o);
  ToolResult r = run(t, "while True: pass");
  EXPECT_EQ(r.text, "Error: timed out after 1.5 s; the process group was killed.");
  EXPECT_EQ(run(t, "print('next')").text, "next\n");
}

TEST_F(PythonToolTest, ForkBombIsContained) {
  PythonToolOptions o = opts();
  o.timeout_s = 3;
  o.max_processes = 16;
  PythonTool t(o);
  ToolResult r = run(t, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n");
  EXPECT_EQ(r.info["error"], true);
  EXPECT_TRUE(contains(r.text, "Error: timed out")) << r.text;
  EXPECT_EQ(run(t, "print('still here')").text, "still here\n");
}

TEST_F(PythonToolTest, HugeAllocationIsAMemoryError) {
  PythonTool t(opts());
  ToolResult r = run(t, "b = bytearray(10 * 2**30)");
  EXPECT_TRUE(contains(r.text, "MemoryError")) << r.text;
  EXPECT_EQ(r.info["error_kind"], "exception");
}

TEST_F(PythonToolTest, WritesOutsideScratchAndNetworkAreRefused) {
  PythonTool t(opts());
  const std::string repo = AGENTR1_SOURCE_DIR;
  ToolResult r = run(t,
                     "import os, socket\n"
                     "for p in ['/work/x.txt', '" + repo + "/x.txt', '/etc/x.txt']:\n"
                     "    try:\n        open(p, 'w').write('x'); print('WROTE', p)\n"
                     "    except OSError as e:\n        print('refused', e.strerror)\n"
                     "print(os.listdir('/work'))\n"
                     "s = socket.socket()\n"
                     "s.connect(('1.1.1.1', 53))\n");
  EXPECT_FALSE(contains(r.text, "WROTE")) << r.text;
  EXPECT_TRUE(contains(r.text, "[]\n")) << "/work is hidden by default: " << r.text;
  EXPECT_TRUE(contains(r.text, "OSError: [Errno 101] Network is unreachable")) << r.text;
  EXPECT_FALSE(fs::exists(repo + "/x.txt"));
}

TEST_F(PythonToolTest, HugePrintIsTruncatedWithANote) {
  PythonToolOptions o = opts();
  o.max_output_chars = 100;
  PythonTool t(o);
  ToolResult r = run(t, "print('y' * 10**6)");
  EXPECT_EQ(r.text, std::string(100, 'y') + "\n[stdout truncated: the first 100 of 1000001 bytes are shown]\n");
  EXPECT_EQ(r.info["stdout_bytes"], 1000001);
}

TEST_F(PythonToolTest, MissingInterpreterIsAnInfraError) {
  PythonToolOptions o = opts();
  o.python = "/nonexistent/python3";
  PythonTool t(o);
  try {
    run(t, "print(1)");
    FAIL() << "no error";
  } catch (const ToolInfraError& e) {
    EXPECT_TRUE(contains(e.what(), "the sandbox could not start")) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file or directory")) << e.what();
  }
}

TEST_F(PythonToolTest, BadArgumentsAreErrorTexts) {
  PythonTool t(opts());
  EXPECT_TRUE(contains(t.execute(json::array()).text, "must be a JSON object"));
  EXPECT_TRUE(contains(t.execute(json::object()).text, "missing required argument 'code'"));
  EXPECT_TRUE(contains(t.execute({{"code", 5}}).text, "must be a string"));
  EXPECT_EQ(t.execute({{"code", 5}}).info["error_kind"], "argument");
}

TEST_F(PythonToolTest, DestructorKillsTheSessionAndRemovesScratch) {
  std::string scratch;
  pid_t pid = -1;
  {
    PythonTool t(opts("session"));
    EXPECT_EQ(run(t, "open('f', 'w').write('1'); print('ok')").text, "ok\n");
    scratch = t.scratch_dir();
    pid = t.session_pid();
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(fs::exists(scratch + "/f"));
  }
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_FALSE(fs::exists(scratch));
}

TEST_F(PythonToolTest, RegisteredWithValidatedKwargs) {
  register_python_tool();
  register_python_tool();  // idempotent
  auto tool = make_tool("python", {{"mode", "session"}, {"scratch_root", root_}});
  EXPECT_EQ(tool->name(), "python");
  EXPECT_TRUE(contains(tool->description(), "persist across calls"));
  EXPECT_EQ(tool->parameters()["required"][0], "code");
  std::string e = error_of([&] { make_tool("python", {{"mode", "sesion"}}); });
  EXPECT_TRUE(contains(e, "mode must be 'fresh' or 'session', got 'sesion'")) << e;
  e = error_of([&] { make_tool("python", {{"timeout", 3}}); });
  EXPECT_TRUE(contains(e, "env_kwargs.tool_kwargs.python")) << e;
  e = error_of([&] { make_tool("python", {{"memory_mb", "lots"}}); });
  EXPECT_TRUE(contains(e, "memory_mb")) << e;
}

}  // namespace
}  // namespace agentr1::env
