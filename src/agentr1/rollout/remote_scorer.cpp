#include "agentr1/rollout/remote_scorer.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/core/http_client.h"

namespace agentr1::rollout {
namespace {

using http::field_of;
using http::malformed;

constexpr const char* kPath = "/v1/completions";

float number_of(const json& v, const std::string& path) {
  const json* x = &v;
  if (v.is_object()) x = &field_of(v, "logprob", path + ".logprob");
  if (!x->is_number()) malformed(path + ".logprob", "must be a number (a log-probability)", *x);
  return static_cast<float>(x->get<double>());
}

}  // namespace

void RemoteScorerOptions::validate(const std::string& p) const {
  http::check_base_url(url, p + "url", kPath);
  http::check_retry_options(timeout_s, retries, backoff_s, p);
  AGENTR1_CHECK(max_prompts_per_request >= 1,
                p << "max_prompts_per_request must be >= 1, got " << max_prompts_per_request);
  AGENTR1_CHECK(max_tokens_per_request >= 1, p << "max_tokens_per_request must be >= 1, got " << max_tokens_per_request);
  AGENTR1_CHECK(max_inflight >= 1 && max_inflight <= 256, p << "max_inflight must be in 1..256, got " << max_inflight);
}

PromptScores parse_prompt_logprobs(const json& entries, const TokenIds& ids, int topk, const std::string& path) {
  if (!entries.is_array())
    malformed(path, "must be a list with one entry per prompt token (HINT: the server must support "
                    "\"prompt_logprobs\": vLLM, agentr1 serve)", entries);
  if (entries.size() != ids.size())
    malformed(path, "must have one entry per prompt token (" + std::to_string(ids.size()) + ")",
              json(std::to_string(entries.size()) + " entries"));
  const size_t k = static_cast<size_t>(topk);
  PromptScores s;
  s.logprob.assign(ids.size(), 0.0f);
  if (k > 0) {
    s.topk_ids.assign(ids.size() * k, 0);
    s.topk_logprob.assign(ids.size() * k, 0.0f);
  }
  struct Cand {
    int64_t id;
    float lp;
    int64_t rank;  // 0 = not given
  };
  std::vector<Cand> cands;
  for (size_t t = 1; t < ids.size(); ++t) {
    const std::string at = path + "[" + std::to_string(t) + "]";
    const json& e = entries[t];
    if (!e.is_object()) malformed(at, "must be an object {\"<token id>\": {\"logprob\", \"rank\"}, ...}", e);
    const std::string key = std::to_string(ids[t]);
    if (!e.contains(key))
      malformed(at, "must hold the actual prompt token " + key + " (it is absent)", e);
    s.logprob[t] = number_of(e[key], at + "[\"" + key + "\"]");
    if (k == 0) continue;
    cands.clear();
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string where = at + "[\"" + it.key() + "\"]";
      char* end = nullptr;
      const long long id = std::strtoll(it.key().c_str(), &end, 10);
      if (it.key().empty() || *end != '\0' || id < 0 || id > INT32_MAX)
        malformed(at, "must be keyed by token ids, has key '" + it.key() + "'", e);
      int64_t rank = 0;
      if (it.value().is_object() && it.value().contains("rank") && !it.value()["rank"].is_null()) {
        const json& r = it.value()["rank"];
        if (!r.is_number_integer()) malformed(where + ".rank", "must be an integer", r);
        rank = r.get<int64_t>();
      }
      cands.push_back(Cand{id, number_of(it.value(), where), rank});
    }
    if (cands.size() < k)
      malformed(at, "must hold the top " + std::to_string(k) + " tokens (\"prompt_logprobs\": " + std::to_string(k) +
                        "); HINT: the server may cap prompt_logprobs (vLLM: --max-logprobs)",
                json(std::to_string(cands.size()) + " entries"));
    // Most likely first: by rank where the server gives ranks (ties in log-prob keep its
    // order), else by log-prob. The actual token, when outside the top k, sorts last.
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      if (a.rank > 0 && b.rank > 0 && a.rank != b.rank) return a.rank < b.rank;
      return a.lp > b.lp;
    });
    for (size_t j = 0; j < k; ++j) {
      s.topk_ids[t * k + j] = static_cast<int32_t>(cands[j].id);
      s.topk_logprob[t * k + j] = cands[j].lp;
    }
  }
  return s;
}

struct RemoteScorer::Impl {
  RemoteScorerOptions opts;
  http::HttpPolicy policy;
  std::string model;
  mutable std::atomic<int64_t> retries{0};

  // One request: sequences [from, to) of seqs into out.
  void score_chunk(const std::vector<TokenIds>& seqs, size_t from, size_t to, double temperature, int topk,
                   std::vector<PromptScores>& out) const {
    json prompts = json::array();
    for (size_t i = from; i < to; ++i) prompts.push_back(seqs[i]);
    const json body{{"model", model},         {"prompt", prompts},          {"max_tokens", 1},
                    {"temperature", temperature}, {"prompt_logprobs", topk}, {"n", 1},
                    {"seed", 0}};
    const std::string what = std::string("POST ") + kPath;
    auto cli = http::make_client(opts.url, policy);
    const http::Reply rep = http::http_call(*cli, opts.url, policy, "POST", kPath, body.dump(), retries);
    if (rep.status >= 400)
      throw Error(policy.peer + " " + opts.url + ": " + what + " (prompt_logprobs) was refused with HTTP " +
                  std::to_string(rep.status) + " (not retried): " + http::body_message(rep.body));
    const json j = http::parse_body(rep, opts.url, what, policy.peer);
    with_context(policy.peer + " " + opts.url + ": " + what, [&] {
      const json& choices = field_of(j, "choices", "choices");
      if (!choices.is_array() || choices.size() != to - from)
        malformed("choices", "must be a list of one choice per prompt (" + std::to_string(to - from) + ")",
                  choices.is_array() ? json(std::to_string(choices.size()) + " choices") : choices);
      std::vector<bool> seen(to - from, false);
      for (size_t c = 0; c < choices.size(); ++c) {
        const std::string path = "choices[" + std::to_string(c) + "]";
        const json& ch = choices[c];
        if (!ch.is_object()) malformed(path, "must be an object", ch);
        size_t index = c;
        if (ch.contains("index") && !ch["index"].is_null()) {
          const json& ix = ch["index"];
          if (!ix.is_number_integer() || ix.get<int64_t>() < 0 || ix.get<uint64_t>() >= to - from)
            malformed(path + ".index", "must be a prompt index in 0.." + std::to_string(to - from - 1), ix);
          index = ix.get<size_t>();
        }
        if (seen[index]) malformed(path + ".index", "repeats another choice's index", ch["index"]);
        seen[index] = true;
        out[from + index] =
            parse_prompt_logprobs(field_of(ch, "prompt_logprobs", path + ".prompt_logprobs"), seqs[from + index],
                                  topk, path + ".prompt_logprobs");
      }
      return 0;
    });
  }
};

RemoteScorer::RemoteScorer(RemoteScorerOptions o, std::string keys) : impl_(std::make_unique<Impl>()) {
  o.validate(keys);
  impl_->opts = std::move(o);
  const RemoteScorerOptions& opts = impl_->opts;
  http::HttpPolicy& h = impl_->policy;
  h.timeout_s = opts.timeout_s;
  h.retries = opts.retries;
  h.backoff_s = opts.backoff_s;
  h.api_key = opts.api_key;
  h.peer = "remote teacher";
  h.keys = keys;
  auto cli = http::make_client(opts.url, h);
  const http::Reply rep = http::http_call(*cli, opts.url, h, "GET", "/v1/models", "", impl_->retries);
  AGENTR1_CHECK(rep.status < 400, h.peer << " " << opts.url << ": GET /v1/models answered HTTP " << rep.status
                                         << ": " << http::body_message(rep.body));
  const json body = http::parse_body(rep, opts.url, "GET /v1/models", h.peer);
  std::vector<std::string> ids;
  with_context(h.peer + " " + opts.url + ": GET /v1/models", [&] {
    const json& data = field_of(body, "data", "data");
    if (!data.is_array()) malformed("data", "must be a list of models", data);
    for (size_t i = 0; i < data.size(); ++i) {
      const json& id = field_of(data[i], "id", "data[" + std::to_string(i) + "].id");
      if (!id.is_string()) malformed("data[" + std::to_string(i) + "].id", "must be a string", id);
      ids.push_back(id.get<std::string>());
    }
    return 0;
  });
  AGENTR1_CHECK(!ids.empty(), h.peer << " " << opts.url << ": GET /v1/models lists no model");
  if (opts.model.empty()) {
    impl_->model = ids.front();
  } else {
    std::string listed;
    for (const std::string& id : ids) listed += (listed.empty() ? "" : ", ") + id;
    AGENTR1_CHECK(std::find(ids.begin(), ids.end(), opts.model) != ids.end(),
                  h.peer << " " << opts.url << " does not serve model '" << opts.model << "' (it lists: " << listed
                         << "); HINT: set " << keys << "model to one of them, or leave it empty");
    impl_->model = opts.model;
  }
}

RemoteScorer::~RemoteScorer() = default;

const std::string& RemoteScorer::url() const { return impl_->opts.url; }
const std::string& RemoteScorer::model_name() const { return impl_->model; }

std::vector<PromptScores> RemoteScorer::score(const std::vector<TokenIds>& seqs, double temperature, int topk) const {
  AGENTR1_CHECK(temperature > 0 && std::isfinite(temperature),
                "remote teacher " << url() << ": temperature must be > 0, got " << temperature);
  AGENTR1_CHECK(topk >= 0, "remote teacher " << url() << ": topk must be >= 0, got " << topk);
  for (size_t i = 0; i < seqs.size(); ++i)
    AGENTR1_CHECK(!seqs[i].empty(), "remote teacher " << url() << ": sequence " << i << " is empty");
  const RemoteScorerOptions& o = impl_->opts;
  std::vector<std::pair<size_t, size_t>> chunks;
  for (size_t i = 0; i < seqs.size();) {
    size_t j = i;
    int64_t tokens = 0;
    while (j < seqs.size() && j - i < static_cast<size_t>(o.max_prompts_per_request) &&
           (j == i || tokens + static_cast<int64_t>(seqs[j].size()) <= o.max_tokens_per_request))
      tokens += static_cast<int64_t>(seqs[j++].size());
    chunks.emplace_back(i, j);
    i = j;
  }
  std::vector<PromptScores> out(seqs.size());
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  auto work = [&] {
    for (size_t c; (c = next.fetch_add(1)) < chunks.size();) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (error) return;
      }
      try {
        impl_->score_chunk(seqs, chunks[c].first, chunks[c].second, temperature, topk, out);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  const size_t n_threads = std::min(chunks.size(), static_cast<size_t>(o.max_inflight));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace agentr1::rollout
