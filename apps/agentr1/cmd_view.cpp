// agentr1 view — watch runs in the browser: metric curves (several runs overlaid, live
// while they train), the trajectory browser (each step's prompt as the policy saw it,
// tokens coloured by advantage, log-prob, learner-vs-engine gap or KL, ids on hover),
// validation dumps across steps, the config and summary.
//
//   agentr1 view runs/default                      # then open http://127.0.0.1:6070/
//   agentr1 view runs/grpo runs/ppo --port 8080    # two runs side by side
//   agentr1 view runs/compare                      # a compare/benchmark dir opens as its runs
//
// Prints one line "agentr1 view: http://HOST:PORT/" on stdout once it listens (with
// --port 0, the port chosen). Ctrl-C stops it. Files are read on every request; nothing
// is written to the runs.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agentr1/core/log.h"
#include "agentr1/view/view_server.h"
#include "command.h"
#include "data_dir.h"

namespace {

struct ViewOpts {
  std::vector<std::string> runs;
  agentr1::view::ViewOptions server;
  std::string static_dir;  // "" = the data dir's view/
};

std::atomic<int> g_view_signal{0};

extern "C" void on_view_signal(int sig) {
  g_view_signal.store(sig);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

int run_view(ViewOpts o) {
  using namespace agentr1;
  o.server.static_dir = o.static_dir.empty() ? cli::data_path("view") : o.static_dir;
  std::vector<view::RunEntry> runs = view::discover_runs(o.runs);
  view::ViewServer server(runs, o.server);
  const int port = server.bind();
  std::signal(SIGINT, on_view_signal);
  std::signal(SIGTERM, on_view_signal);
  for (const view::RunEntry& r : runs) AGENTR1_LOG(INFO) << "view: run " << r.name << " (" << r.path << ")";
  const std::string line = "agentr1 view: http://" + o.server.host + ":" + std::to_string(port) + "/\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (g_view_signal.load() != 0) {
        server.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.serve();
  done = true;
  watcher.join();
  return 0;
}

agentr1::cli::Registrar reg("view", "Watch runs in the browser: curves, trajectories, validation, config",
                            [](CLI::App& app) {
  auto o = std::make_shared<ViewOpts>();
  app.add_option("runs", o->runs,
                 "run directories (runs/default, ...); a compare or benchmark directory opens as its runs")
      ->required();
  app.add_option("--port", o->server.port, "port to listen on (0 = any free one, printed on stdout)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--host", o->server.host,
                 "address to bind (0.0.0.0 shows the runs, configs included, to the network)")
      ->capture_default_str();
  app.add_option("--tokenizer", o->server.tokenizer_dir,
                 "tokenizer directory for every run (default: each run's latest checkpoint, else its model.path)");
  app.add_option("--static-dir", o->static_dir,
                 "serve the page from this directory (default: the data dir's view/; for editing the page)");
  app.add_option("--threads", o->server.threads, "HTTP worker threads")->capture_default_str()->check(CLI::Range(1, 64));
  return [o]() -> int { return run_view(*o); };
});

}  // namespace
