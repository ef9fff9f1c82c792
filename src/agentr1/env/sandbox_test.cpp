// The process sandbox on this machine's kernel: each escape or exhaustion attempt is
// contained, reported as the command's failure, and leaves no process behind. The
// commands are Debian's python3 (the sandbox's user); every test marks its processes
// with a unique environment variable and checks /proc for survivors afterwards.
#include "agentr1/env/sandbox.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace agentr1::env {
namespace {

namespace fs = std::filesystem;
const std::string kPython = "/usr/bin/python3";

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Processes whose environment holds `mark` (the sandbox's, by construction).
int count_marked(const std::string& mark) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "environ", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    if (contains(ss.str(), mark)) ++n;
  }
  return n;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    mark_ = "AGENTR1_SANDBOX_TEST=" + std::to_string(rd()) + std::to_string(getpid());
    dir_ = fs::temp_directory_path() / ("agentr1-sandbox-test-" + std::to_string(rd()));
    fs::create_directories(dir_);
    if (geteuid() == 0) ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
    opts_.scratch_dir = dir_.string();
    opts_.timeout_s = 20;  // generous: the tests that want a timeout set a short one
  }
  void TearDown() override {
    EXPECT_EQ(count_marked(mark_), 0) << "a sandboxed process outlived its sandbox";
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  SandboxResult py(const std::string& code, const std::string& stdin_text = "") {
    return run_sandboxed({kPython, "-E", "-s", "-c", code}, stdin_text,
                         {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", mark_}, opts_);
  }
  std::string mark_;
  fs::path dir_;
  SandboxOptions opts_;
};

TEST_F(SandboxTest, RunsAndCapturesBothStreams) {
  SandboxResult r = py("import sys; print(2+3); print('oops', file=sys.stderr); print(sys.stdin.read())",
                       "from stdin");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.stdout_text, "5\nfrom stdin\n");
  EXPECT_EQ(r.stderr_text, "oops\n");
  EXPECT_GT(r.wall_s, 0);
}

TEST_F(SandboxTest, ReportsExitCodesAndSignals) {
  SandboxResult r = py("import os; os._exit(3)");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  r = py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)");
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_FALSE(r.timed_out);
}

TEST_F(SandboxTest, InfiniteLoopTimesOutAndTheGroupIsKilled) {
  opts_.timeout_s = 1.5;
  SandboxResult r = py("print('before', flush=True)\nwhile True: pass");
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.stdout_text, "before\n");  // output before the timeout is kept
  EXPECT_GE(r.wall_s, 1.4);
  EXPECT_LT(r.wall_s, 10.0);
}

TEST_F(SandboxTest, ProcessesThatLeaveTheGroupDieWithTheSandbox) {
  // A grandchild in its own session (setsid) escapes the process group but not the PID
  // namespace: it dies when the command exits.
  SandboxResult r = py(
      "import os, time\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    time.sleep(60)\n"
      "    os._exit(0)\n"
      "time.sleep(0.3)\nprint('parent done')");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "parent done\n");
  EXPECT_LT(r.wall_s, 10.0) << "the grandchild kept the output pipe open";
}

TEST_F(SandboxTest, ForkBombIsCappedByTheProcessLimit) {
  opts_.max_processes = 16;
  opts_.timeout_s = 3;
  SandboxResult r = py(
      "import os, time\n"
      "n = 0\n"
      "try:\n"
      "    while True:\n"
      "        if os.fork() == 0:\n"
      "            time.sleep(30)\n"
      "            os._exit(0)\n"
      "        n += 1\n"
      "except OSError as e:\n"
      "    print('forks', n, 'then', type(e).__name__, flush=True)\n");
  EXPECT_FALSE(r.timed_out) << r.stderr_text;
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_TRUE(contains(r.stdout_text, "then BlockingIOError")) << r.stdout_text << r.stderr_text;
  int forks = std::stoi(r.stdout_text.substr(6));
  EXPECT_GE(forks, 1);
  EXPECT_LE(forks, 15) << "RLIMIT_NPROC was not enforced";
}

TEST_F(SandboxTest, HugeAllocationFailsUnderTheMemoryLimit) {
  opts_.memory_mb = 512;
  SandboxResult r = py("b = bytearray(10 * 2**30)");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.stderr_text, "MemoryError")) << r.stderr_text;
}

TEST_F(SandboxTest, CpuLimitKillsABusyLoop) {
  opts_.cpu_s = 1;
  opts_.timeout_s = 20;
  SandboxResult r = py("while True: pass");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, SIGXCPU) << signal_name(r.signal);
}

TEST_F(SandboxTest, WritesOutsideTheScratchDirectoryFail) {
  const std::string repo = AGENTR1_SOURCE_DIR;
  const std::string outside_tmp = "/tmp/agentr1-sandbox-escape-" + std::to_string(getpid());
  std::string code =
      "import os\n"
      "for p in ['" + repo + "/escape.txt', '/work/escape.txt', '/etc/escape.txt', '/usr/escape',\n"
      "          '/dev/shm/../escape']:\n"
      "    try:\n"
      "        open(p, 'w').write('x')\n"
      "        print('WROTE', p)\n"
      "    except OSError as e:\n"
      "        print('refused', p, e.strerror)\n"
      "open('inside.txt', 'w').write('ok')\n"
      "open('" + fs::path(dir_).parent_path().string() + "/escape.txt', 'w').write('x')\n"
      "open('" + outside_tmp + "', 'w').write('private tmp')\n"
      "print(open('" + outside_tmp + "').read())\n";
  SandboxResult r = py(code);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(contains(r.stdout_text, "WROTE")) << r.stdout_text;
  EXPECT_TRUE(contains(r.stdout_text, "private tmp")) << r.stdout_text;
  EXPECT_FALSE(fs::exists(repo + "/escape.txt"));
  EXPECT_FALSE(fs::exists(outside_tmp)) << "the sandbox's /tmp must be private";
  EXPECT_FALSE(fs::exists(fs::path(dir_).parent_path() / "escape.txt"))
      << "the scratch dir's parent (under /tmp) is the sandbox's private /tmp";
  std::ifstream in(dir_ / "inside.txt");
  std::string got;
  in >> got;
  EXPECT_EQ(got, "ok") << "the scratch directory must be writable and shared with the host";
}

TEST_F(SandboxTest, HiddenPathsAreEmpty) {
  opts_.hide_paths = {"/work", "/root", "/no/such/dir"};
  SandboxResult r = py("import os; print(os.listdir('/work'), os.listdir('/root'))");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "[] []\n");
}

TEST_F(SandboxTest, NoNetwork) {
  SandboxResult r = py(
      "import socket\n"
      "for host, port in [('127.0.0.1', 22), ('1.1.1.1', 53)]:\n"
      "    s = socket.socket()\n"
      "    s.settimeout(2)\n"
      "    try:\n"
      "        s.connect((host, port))\n"
      "        print('CONNECTED', host)\n"
      "    except OSError as e:\n"
      "        print('refused', host, e.strerror)\n");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_FALSE(contains(r.stdout_text, "CONNECTED")) << r.stdout_text;
  EXPECT_TRUE(contains(r.stdout_text, "refused 1.1.1.1 Network is unreachable")) << r.stdout_text;
}

TEST_F(SandboxTest, NoCapabilitiesAndOwnProcessView) {
  SandboxResult r = py(
      "import os\n"
      "st = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
      "print(st['CapEff'].strip(), st['CapBnd'].strip(), st['NoNewPrivs'].strip())\n"
      "print(len([p for p in os.listdir('/proc') if p.isdigit()]) < 10)\n");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "0000000000000000 0000000000000000 1\nTrue\n");
}

TEST_F(SandboxTest, OutputIsCutAtTheLimitAndCounted) {
  opts_.max_output_bytes = 1000;
  SandboxResult r = py("import sys; sys.stdout.write('x' * 10**7); sys.stderr.write('e' * 5000)");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, std::string(1000, 'x'));
  EXPECT_EQ(r.stdout_bytes, 10000000u);
  EXPECT_TRUE(r.stdout_truncated());
  EXPECT_EQ(r.stderr_text.size(), 1000u);
  EXPECT_EQ(r.stderr_bytes, 5000u);
}

TEST_F(SandboxTest, FileSizeLimit) {
  opts_.max_file_mb = 1;
  SandboxResult r = py(
      "try:\n"
      "    open('big', 'wb').write(b'x' * (2 << 20))\n"
      "except OSError as e:\n"
      "    print(e.strerror)\n");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "File too large\n");
}

TEST_F(SandboxTest, MissingBinaryIsASandboxError) {
  try {
    run_sandboxed({"/nonexistent/python3", "-c", "1"}, "", {}, opts_);
    FAIL() << "no error";
  } catch (const SandboxError& e) {
    EXPECT_TRUE(contains(e.what(), "execve /nonexistent/python3: No such file or directory")) << e.what();
  }
}

TEST_F(SandboxTest, ConcurrentSandboxesDoNotHoldEachOthersPipes) {
  // Each sandbox's init closes descriptors inherited from sandboxes other threads were
  // starting: otherwise a copy of another's output pipe would delay its EOF.
  std::vector<std::thread> threads;
  std::vector<SandboxResult> results(4);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = py("import time; time.sleep(0.5); print(" + std::to_string(i) + ")"); });
  }
  for (auto& t : threads) t.join();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].stdout_text, std::to_string(i) + "\n") << results[i].stderr_text;
  }
  EXPECT_LT(took, 12.0);
}

TEST_F(SandboxTest, LongLivedProcessWithControlChannel) {
  auto p = SandboxProcess::start(
      {kPython, "-E", "-s", "-u", "-c",
       "import os, sys\nctl = os.fdopen(3, 'w', buffering=1)\n"
       "for line in sys.stdin:\n    print('got', line.strip())\n    ctl.write('done\\n')\n"},
      {mark_}, opts_, /*control_channel=*/true);
  SandboxExchange a = p->exchange("one\n", 10);
  ASSERT_TRUE(a.control_line.has_value()) << a.stderr_text;
  EXPECT_EQ(*a.control_line, "done");
  EXPECT_EQ(a.stdout_text, "got one\n");
  SandboxExchange b = p->exchange("two\n", 10);
  EXPECT_EQ(b.stdout_text, "got two\n");
  pid_t pid = p->pid();
  EXPECT_EQ(::kill(pid, 0), 0);
  p.reset();
  EXPECT_NE(::kill(pid, 0), 0) << "the sandbox's init was not reaped";
}

TEST(SandboxOptionsTest, ValidateNamesFieldAndValue) {
  SandboxOptions o;
  o.scratch_dir = "relative";
  EXPECT_THROW(o.validate(), Error);
  o.scratch_dir = "/tmp";
  o.max_processes = 1;
  try {
    o.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "max_processes must be >= 2, got 1")) << e.what();
  }
}

}  // namespace
}  // namespace agentr1::env
