// agentr1/serve/http_listen.h — binding and running a cpp-httplib server, shared by
// `agentr1 serve` (openai_server) and `agentr1 view` (view/view_server).
//
//   int port = bind_http(svr, "127.0.0.1", 0, "serve");   // 0 = any free port
//   std::thread t([&] { listen_until(svr, stop_flag); });  // returns once stop_flag is set
#pragma once

#include <atomic>
#include <string>

#include <httplib.h>

namespace agentr1::serve {

// Binds host:port (port 0: a free one chosen by the system) and returns the bound port.
// Throws Error naming `who`, the address and what to change (--port, --host).
int bind_http(httplib::Server& svr, const std::string& host, int port, const std::string& who);

// Runs svr's listen loop (after bind_http) until `stop` is set; requests in flight are
// answered first. httplib's stop() is a no-op before its loop runs and must not be
// repeated, so a watcher turns the flag into one svr.stop() once the loop is running:
// a stop requested before the loop started is not lost.
void listen_until(httplib::Server& svr, const std::atomic<bool>& stop);

}  // namespace agentr1::serve
