#include "agentr1/core/http_client.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"

namespace agentr1::http {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kMaxBackoffS = 30.0;
constexpr double kMaxConnectS = 10.0;

}  // namespace

double float_for_wire(float x) {
  if (!std::isfinite(x)) return static_cast<double>(x);
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, static_cast<double>(x));
    if (std::strtof(buf, nullptr) == x) return std::strtod(buf, nullptr);
  }
  return static_cast<double>(x);
}

std::string snippet(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

std::string body_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
        j["error"]["message"].is_string())
      return j["error"]["message"].get<std::string>();
    if (j.contains("error") && j["error"].is_string()) return j["error"].get<std::string>();
    for (const char* k : {"message", "detail"})
      if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
  }
  return body.empty() ? "(empty body)" : snippet(body);
}

void check_base_url(const std::string& url, const std::string& key, const std::string& paths) {
  const size_t scheme = url.find("://");
  AGENTR1_CHECK(scheme != std::string::npos &&
                    (url.compare(0, scheme, "http") == 0 || url.compare(0, scheme, "https") == 0),
                key << "='" << url << "' must start with http:// or https:// (e.g. http://127.0.0.1:8000)");
  const std::string rest = url.substr(scheme + 3);
  AGENTR1_CHECK(!rest.empty() && rest.find('/') == std::string::npos,
                key << "='" << url << "' must be a server's base URL, scheme://host:port without a path "
                    << "(the client adds " << paths << "); HINT: " << url.substr(0, scheme + 3 + rest.find('/')));
}

void check_retry_options(double timeout_s, int retries, double backoff_s, const std::string& prefix) {
  AGENTR1_CHECK(timeout_s > 0 && std::isfinite(timeout_s), prefix << "timeout_s must be > 0 seconds, got " << timeout_s);
  AGENTR1_CHECK(retries >= 0 && retries <= 10, prefix << "retries must be in 0..10, got " << retries);
  AGENTR1_CHECK(backoff_s >= 0 && std::isfinite(backoff_s), prefix << "backoff_s must be >= 0 seconds, got " << backoff_s);
}

std::unique_ptr<httplib::Client> make_client(const std::string& url, const HttpPolicy& p) {
  auto cli = std::make_unique<httplib::Client>(url);
  auto usec = [](double s) { return std::chrono::microseconds(static_cast<int64_t>(s * 1e6)); };
  cli->set_connection_timeout(usec(std::min(p.timeout_s, kMaxConnectS)));
  cli->set_read_timeout(usec(p.timeout_s));
  cli->set_write_timeout(usec(p.timeout_s));
  // A connection per request: servers that give each open connection a thread (cpp-httplib,
  // agentr1 serve) would otherwise hold one per idle worker of ours and make the others
  // queue until an idle one times out (measured: 5.6 s instead of 0.6 s of generation for
  // 64 requests on 16 server threads). Connecting costs well under a millisecond on a LAN.
  cli->set_keep_alive(false);
  if (!p.api_key.empty()) cli->set_bearer_token_auth(p.api_key);
  return cli;
}

Reply http_call(httplib::Client& cli, const std::string& url, const HttpPolicy& p, const std::string& method,
                const std::string& path, const std::string& body, std::atomic<int64_t>& retries) {
  const std::string what = method + " " + path;
  const int attempts = 1 + p.retries;
  std::string cause;
  for (int a = 1; a <= attempts; ++a) {
    const auto t0 = Clock::now();
    httplib::Result res = method == "GET" ? cli.Get(path.c_str())
                                          : cli.Post(path.c_str(), body, "application/json");
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (res) {
      if (res->status < 500) return Reply{res->status, res->body};
      cause = "HTTP " + std::to_string(res->status) + ": " + body_message(res->body);
    } else {
      const httplib::Error e = res.error();
      std::ostringstream os;
      if (e == httplib::Error::Connection || e == httplib::Error::ConnectionTimeout) {
        os << "cannot connect (" << httplib::to_string(e) << ")";
      } else if (e == httplib::Error::Read && dt >= 0.9 * p.timeout_s) {
        os << "no response within " << p.keys << "timeout_s=" << p.timeout_s << " s";
      } else {
        os << "the connection failed after " << dt << " s (" << httplib::to_string(e) << ")";
      }
      cause = os.str();
    }
    if (a < attempts) {
      const double wait = std::min(kMaxBackoffS, p.backoff_s * std::pow(2.0, a - 1));
      retries.fetch_add(1);
      AGENTR1_LOG(DEBUG) << p.peer << " " << url << ": " << what << " attempt " << a << " of " << attempts
                         << " failed (" << cause << "); retrying in " << wait << " s";
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      cli.stop();  // a fresh connection for the next attempt
    }
  }
  throw Error(p.peer + " " + url + ": " + what + " failed after " + std::to_string(attempts) + " attempt" +
              (attempts == 1 ? "" : "s") + " (" + p.keys + "retries=" + std::to_string(p.retries) + "): " + cause +
              ". HINT: is the server running and reachable at " + url + "? (a slow one: raise " + p.keys +
              "timeout_s)");
}

json parse_body(const Reply& r, const std::string& url, const std::string& what, const std::string& peer) {
  json j = json::parse(r.body, nullptr, false);
  AGENTR1_CHECK(!j.is_discarded(), peer << " " << url << ": " << what << ": the response is not JSON: "
                                        << snippet(r.body));
  AGENTR1_CHECK(j.is_object(), peer << " " << url << ": " << what << ": the response is not a JSON object: "
                                    << snippet(r.body));
  return j;
}

void malformed(const std::string& field, const std::string& rule, const json& got) {
  throw Error("malformed response: field '" + field + "' " + rule + ", got " +
              (got.is_null() ? std::string("nothing") : snippet(got.dump())));
}

const json& field_of(const json& obj, const std::string& key, const std::string& path) {
  static const json null_json;
  if (!obj.is_object() || !obj.contains(key)) malformed(path, "is missing", null_json);
  return obj[key];
}

}  // namespace agentr1::http
