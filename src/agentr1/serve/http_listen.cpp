#include "agentr1/serve/http_listen.h"

#include <chrono>
#include <thread>

#include "agentr1/core/error.h"

namespace agentr1::serve {

int bind_http(httplib::Server& svr, const std::string& host, int port, const std::string& who) {
  if (port == 0) {
    const int bound = svr.bind_to_any_port(host);
    AGENTR1_CHECK(bound > 0, who << ": cannot bind a free port on host '" << host << "'; check --host");
    return bound;
  }
  AGENTR1_CHECK(svr.bind_to_port(host, port),
                who << ": cannot bind " << host << ":" << port
                    << " (in use, or not an address of this machine); choose another --port (0 = any free one) "
                       "or --host");
  return port;
}

void listen_until(httplib::Server& svr, const std::atomic<bool>& stop) {
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (stop && svr.is_running()) {
        svr.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  svr.listen_after_bind();
  done = true;
  watcher.join();
}

}  // namespace agentr1::serve
