// agentr1/core/http_client.h — the HTTP client plumbing every remote caller shares
// (rollout's RemoteGenerator and RemoteScorer, tasks' RewardService), so all retry, time
// out and word their errors alike.
//
//   http::HttpPolicy p;                             // fill one: peer and keys name
//   p.peer = "remote teacher";                      // the server and config in errors
//   p.keys = "actor.teacher.";
//   auto cli = make_client(url, p);
//   Reply r = http_call(*cli, url, p, "POST", "/v1/completions", body.dump(), retries);
//   json j = parse_body(r, url, "POST /v1/completions", p.peer);
//
// No torch; httplib is only forward-declared here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "agentr1/core/json.h"

namespace httplib {
class Client;
}

namespace agentr1::http {

struct HttpPolicy {
  double timeout_s = 300;                 // seconds one attempt may wait for its response
                                          // (the connection itself: at most 10 s); > 0
  int retries = 3;                        // extra attempts after a connection failure, timeout
                                          // or 5xx (never after a 4xx)
  double backoff_s = 0.5;                 // wait before the first retry, doubled each time
                                          // (capped at 30 s)
  std::string api_key;                    // "Authorization: Bearer <key>"; "" = none
  std::string peer = "remote engine";     // how errors name the server ("remote engine <url>")
  std::string keys = "rollout.remote.";   // config prefix errors name for timeout_s / retries
};

// Throws Error unless `url` is a server's base URL, http(s)://host:port without a path:
// "<key>='<url>' must start with http:// or https:// (e.g. http://127.0.0.1:8000)", or
// "... must be a server's base URL, scheme://host:port without a path (the client adds
// <paths>); HINT: <the url without its path>". `key` is the dotted config key.
void check_base_url(const std::string& url, const std::string& key, const std::string& paths);
// Throws Error "<prefix>timeout_s must be > 0 seconds, got <v>" (and likewise retries in
// 0..10, backoff_s >= 0): the rules of HttpPolicy's fields, for options that carry them.
void check_retry_options(double timeout_s, int retries, double backoff_s, const std::string& prefix);

// A client with the policy's timeouts and key, one connection per request (see
// remote_generator.h on keep-alive).
std::unique_ptr<httplib::Client> make_client(const std::string& url, const HttpPolicy& p);

struct Reply {
  int status = 0;
  std::string body;
};

// One HTTP request with the retry policy. Returns the reply of the first attempt answered
// with a status below 500 (4xx included: the caller words its error); throws Error after
// the last failed attempt, naming peer, url, the request, the attempts and the last cause.
// `retries` counts the attempts repeated.
Reply http_call(httplib::Client& cli, const std::string& url, const HttpPolicy& p, const std::string& method,
                const std::string& path, const std::string& body, std::atomic<int64_t>& retries);

// The reply's JSON object; Error "<peer> <url>: <what>: the response is not JSON ..." else.
json parse_body(const Reply& r, const std::string& url, const std::string& what,
                const std::string& peer = "remote engine");

// The message of an error body: OpenAI's {"error": {"message"}}, SGLang's / ours
// {"message"} or {"detail"}; else the body itself (shortened).
std::string body_message(const std::string& body);
// The shortest decimal that reads back as the same float, as a double: 0.7f goes out as
// 0.7, not 0.699999988079071 (a server parsing a double then rounding to float gets x).
double float_for_wire(float x);
// s, cut to n characters with "..." when longer.
std::string snippet(const std::string& s, size_t n = 300);

// Error "malformed response: field '<field>' <rule>, got <got>".
[[noreturn]] void malformed(const std::string& field, const std::string& rule, const json& got);
// obj[key], or malformed(path, "is missing").
const json& field_of(const json& obj, const std::string& key, const std::string& path);

}  // namespace agentr1::http
