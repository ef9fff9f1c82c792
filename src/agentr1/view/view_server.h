// agentr1/view/view_server.h — the HTTP side of `agentr1 view`: the web page's static
// files and a JSON API over run directories (run_reader.h), read afresh on every request
// so a page watching a training run sees it grow.
//
//   view::ViewOptions o;  o.port = 0;  o.static_dir = data_path("view");
//   view::ViewServer server(discover_runs({"runs/default"}), o);
//   int port = server.bind();                 // throws Error if the address is taken
//   std::thread t([&] { server.serve(); });   // blocks until stop()
//
// Routes (GET; JSON answers; errors are 4xx/5xx {"error": message}; a request whose Host
// is not this server's address is refused with 403, see host_allowed):
//   /                 index.html, and the other files of static_dir (view.js, view.css)
//   /api/runs         {"runs": [{"id", "name", "path", "tokenizer": bool}]}
//   /api/metrics      ?run=ID&from=OFFSET&file=ID   read_metrics (incremental: pass "next"
//                                           and "file" back)
//   /api/steps        ?run=ID               list_steps
//   /api/trajectories ?run=ID&step=N&kind=train|val   read_trajectories
//   /api/val_compare  ?run=ID&index=I       val_compare
//   /api/config       ?run=ID               {"text": config.yaml}
//   /api/summary      ?run=ID               summary.json
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agentr1/view/run_reader.h"

namespace agentr1::view {

struct ViewOptions {
  std::string host = "127.0.0.1";  // 0.0.0.0 shows the runs to the network
  int port = 6070;                 // 0 = a free port chosen by the system (6006 is
                                   // TensorBoard's, so both can run)
  std::string static_dir;          // index.html, view.js, view.css
  std::string tokenizer_dir;       // one tokenizer for every run; "" = each run's own
                                   // (find_tokenizer_dir), or none
  int threads = 4;                 // HTTP worker threads
};

// Whether a request's Host header names this server (the guard against DNS rebinding):
// 127.0.0.1, localhost, ::1 or the bound host, with any port; any Host when bound to all
// interfaces (0.0.0.0, ::); a request without Host (HTTP/1.0) is answered.
bool host_allowed(const std::string& host_header, const std::string& bound_host);

class ViewServer {
 public:
  // Loads the runs' tokenizers (one load per directory). Throws Error when static_dir
  // has no index.html, or when options.tokenizer_dir does not load; a run whose own
  // tokenizer does not load is served without one (a WARN names it), and looked at again
  // on later requests.
  ViewServer(std::vector<RunEntry> runs, ViewOptions options);
  ~ViewServer();
  ViewServer(const ViewServer&) = delete;
  ViewServer& operator=(const ViewServer&) = delete;

  // Binds host:port; returns the port (the chosen one for port 0). Throws Error naming
  // the address when it cannot bind.
  int bind();
  void serve();  // until stop(); call after bind()
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agentr1::view
