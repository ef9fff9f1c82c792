// Asynchronous rollout on remote servers (AsyncRolloutSource's remote constructor,
// rollout.engine=remote rollout.max_staleness=k) against a scripted server that behaves
// as `agentr1 serve` does on a reload (it stops admitting requests, lets the admitted ones
// finish, swaps, stamps the new version on later responses) but takes RELOAD_MS to load,
// far longer than writing the tiny model: the learner's push costs only the write, the
// producer starts step s's groups only once the servers loaded version >= s - 1 - k,
// partial_rollout=false never reloads with a request in flight, and the final validation
// runs on the learner's last version.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "agentr1/core/config.h"
#include "agentr1/core/error.h"
#include "agentr1/train/rl_trainer.h"
#include "agentr1/train/train_config.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;
using testing::read_jsonl;
using testing::step_metrics;

constexpr int kReloadMs = 600;
constexpr int kGenerateMs = 20;

// /v1/models, /v1/completions (two tokens: 'd' then the request's first stop token, after
// kGenerateMs) and /update_weights_from_disk (drain, then kReloadMs, then the version).
class ScriptedServer {
 public:
  struct Completion {
    double temperature;
    int64_t version;
  };
  ScriptedServer() {
    svr_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    svr_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object": "list", "data": [{"id": "tiny"}]})", "application/json");
    });
    svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      int64_t version;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return !reloading_; });  // admitted only between reloads
        ++inflight_;
        version = version_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kGenerateMs));
      const int64_t stop = body["stop_token_ids"][0].get<int64_t>();
      json choice = {{"index", 0},
                     {"text", ""},
                     {"token_ids", {100, stop}},
                     {"logprobs", {{"token_logprobs", {-0.5, -0.25}}}},
                     {"finish_reason", "stop"},
                     {"stop_reason", stop},
                     {"policy_version", version}};
      res.set_content(json{{"id", "c"}, {"choices", json::array({choice})}}.dump(), "application/json");
      std::lock_guard<std::mutex> g(mu_);
      completions_.push_back({body.value("temperature", 1.0), version});
      --inflight_;
      cv_.notify_all();
    });
    svr_.Post("/update_weights_from_disk", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body);
      std::unique_lock<std::mutex> lk(mu_);
      if (inflight_ > 0) ++reloads_with_requests_in_flight_;
      reloading_ = true;
      cv_.wait(lk, [this] { return inflight_ == 0; });  // the admitted requests finish first
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(kReloadMs));
      lk.lock();
      version_ = body["policy_version"].get<int64_t>();
      loaded_.push_back(version_);
      reloading_ = false;
      cv_.notify_all();
      res.set_content(R"({"success": true, "message": "ok"})", "application/json");
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 200 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~ScriptedServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<int64_t> loaded() const {
    std::lock_guard<std::mutex> g(mu_);
    return loaded_;
  }
  std::vector<Completion> completions() const {
    std::lock_guard<std::mutex> g(mu_);
    return completions_;
  }
  int reloads_with_requests_in_flight() const {
    std::lock_guard<std::mutex> g(mu_);
    return reloads_with_requests_in_flight_;
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool reloading_ = false;
  int inflight_ = 0;
  int64_t version_ = -1;  // nothing loaded yet
  std::vector<int64_t> loaded_;
  std::vector<Completion> completions_;
  int reloads_with_requests_in_flight_ = 0;
};

json run_tree(const std::string& dir, const std::string& run, const std::string& url,
              const std::vector<std::string>& extra) {
  json tree = default_train_tree();
  std::vector<std::string> o = {
      "model.path=" + dir + "/model", "trainer.output_dir=" + run, "trainer.test_freq=0", "trainer.threads=1",
      "data.train_batch_size=2", "data.val_size=2", "rollout.n=2", "rollout.val_k=1", "rollout.max_new_tokens=6",
      "rollout.max_prompt_tokens=2048", "rollout.max_steps=1", "rollout.temperature=0.7", "trainer.progress=false",
      "trainer.dump_trajectories=-1", "actor.optim.lr=1e-3", "rollout.engine=remote",
      "rollout.remote.urls=[" + url + "]", "rollout.remote.retries=0"};
  o.insert(o.end(), extra.begin(), extra.end());
  for (const std::string& x : o) apply_override(tree, x);
  return tree;
}

void check_run(const std::string& name, const std::string& run, const ScriptedServer& server, int steps, int k) {
  // The servers loaded every pushed version that was not replaced first, in order, and
  // the last one (the final validation waited for it).
  const std::vector<int64_t> loaded = server.loaded();
  ASSERT_FALSE(loaded.empty()) << name;
  EXPECT_EQ(loaded.front(), 0) << name;
  EXPECT_EQ(loaded.back(), steps) << name;
  for (size_t i = 1; i < loaded.size(); ++i) EXPECT_LT(loaded[i - 1], loaded[i]) << name;
  // Every trained step within the bound, by the versions the server stamped.
  for (int s = 1; s <= steps; ++s) {
    char file[48];
    std::snprintf(file, sizeof(file), "/trajectories/step_%06d.jsonl", s);
    const std::vector<json> trajs = read_jsonl(run + file);
    EXPECT_EQ(trajs.size(), 4u) << name << " step " << s;
    for (const json& t : trajs)
      for (const json& st : t["steps"]) {
        EXPECT_GE(st["policy_version"].get<int64_t>(), s - 1 - k) << name << " step " << s;
        EXPECT_LE(st["policy_version"].get<int64_t>(), s - 1) << name << " step " << s;
      }
  }
  // The learner paid for writing the weights, not for the servers' reload.
  const std::vector<json> ms = step_metrics(run);
  ASSERT_EQ(ms.size(), static_cast<size_t>(steps)) << name;
  double swap_s = 0, requests = 0;
  for (const json& m : ms) {
    EXPECT_LT(m["timing/weight_write"].get<double>(), kReloadMs / 2000.0) << name << ": " << m.dump();
    requests += m["remote/requests"].get<double>();
    swap_s += m["timing/weight_swap"].get<double>();
  }
  EXPECT_GE(requests, 4.0 * steps) << name << ": remote/requests counts the servers' answers";
  EXPECT_GE(swap_s, 0.9 * kReloadMs / 1000.0) << name << ": the producer timed the reloads";
  // Validation generates on the learner's weights: the baseline on version 0, the final
  // validation on the last (greedy at temperature 0, mean@k at 1.0; rollouts at 0.7).
  int on_last = 0;
  for (const auto& c : server.completions()) {
    if (std::abs(c.temperature - 0.7) < 1e-6) continue;  // a rollout (sent as a float)
    EXPECT_TRUE(c.version == 0 || c.version == steps) << name << ": a validation request on version " << c.version;
    on_last += c.version == steps;
  }
  EXPECT_GT(on_last, 0) << name;
}

TEST(AsyncRemoteTest, ReloadsOnTheProducerSideWithinTheBound) {
  const std::string dir = testing::make_tiny_model_dir("asyncremote");
  for (const bool partial : {true, false}) {
    const std::string name = partial ? "partial_rollout=true" : "partial_rollout=false";
    ScriptedServer server;
    const std::string run = dir + (partial ? "/partial" : "/whole");
    const json tree = run_tree(dir, run, server.url(),
                               {"trainer.total_steps=4", "rollout.max_staleness=1",
                                std::string("rollout.partial_rollout=") + (partial ? "true" : "false")});
    RLTrainer t(load_train_config(tree), tree);
    EXPECT_EQ(t.run(RunMode::kFresh).steps, 4) << name;
    check_run(name, run, server, 4, 1);
    if (!partial) {
      EXPECT_EQ(server.reloads_with_requests_in_flight(), 0) << "a reload reached a busy server";
    }
    // The weights directory keeps the version the servers hold.
    EXPECT_TRUE(fs::exists(run + "/remote_weights/policy_v000004/model.safetensors")) << name;
  }
  fs::remove_all(dir);
}

TEST(AsyncRemoteTest, RemoteWithStalenessIsAValidConfiguration) {
  json tree = default_train_tree();
  apply_override(tree, "rollout.engine=remote");
  apply_override(tree, "rollout.remote.urls=[http://127.0.0.1:1]");
  apply_override(tree, "rollout.max_staleness=2");
  apply_override(tree, "rollout.partial_rollout=false");
  EXPECT_NO_THROW(load_train_config(tree));
}

}  // namespace
}  // namespace agentr1::train
