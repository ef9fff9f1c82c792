// WeightPusher (weight_push.h): the directory a version is written to, its contents (an
// HF model that loads back to the learner's parameters bit for bit, with the tokenizer
// files), the load request every server receives, and which directories are kept: the
// loaded one only, the previous one while a load fails, none of the .tmp ones.
#include "agentr1/train/rollout/weight_push.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agentr1/core/error.h"
#include "agentr1/rollout/remote_generator.h"
#include "agentr1/train/train_test_util.h"

namespace agentr1::train {
namespace {

namespace fs = std::filesystem;

// A server that answers GET /v1/models and POST /update_weights_from_disk (success, or
// the failure set by fail()), recording the load requests' bodies.
class FakeLoadServer {
 public:
  FakeLoadServer() {
    svr_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object": "list", "data": [{"id": "tiny"}]})", "application/json");
    });
    svr_.Post("/update_weights_from_disk", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> g(mu_);
      loads_.push_back(json::parse(req.body));
      if (fail_.empty()) {
        res.set_content(R"({"success": true, "message": "ok"})", "application/json");
      } else {
        res.status = 400;
        res.set_content(json{{"success", false}, {"message", fail_}}.dump(), "application/json");
      }
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    for (int i = 0; i < 200 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeLoadServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void fail(const std::string& message) {
    std::lock_guard<std::mutex> g(mu_);
    fail_ = message;
  }
  std::vector<json> loads() const {
    std::lock_guard<std::mutex> g(mu_);
    return loads_;
  }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<json> loads_;
  std::string fail_;
};

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(WeightPushTest, PolicyDirName) {
  EXPECT_EQ(policy_dir_name(0), "policy_v000000");
  EXPECT_EQ(policy_dir_name(3), "policy_v000003");
  EXPECT_EQ(policy_dir_name(1234567), "policy_v1234567");  // wider than 6 digits: not cut
  EXPECT_THROW(policy_dir_name(-1), Error);
}

TEST(WeightPushTest, WritesLoadsAndKeepsOnlyTheLoadedVersion) {
  const std::string dir = testing::make_tiny_model_dir("wpush");
  const std::string model_dir = dir + "/model";
  model::Transformer policy = model::load_pretrained(model_dir, at::kFloat, at::kCPU);
  {
    at::NoGradGuard no_grad;
    policy->parameters()[0].add_(0.25);  // the learner's weights differ from the model on disk
  }
  const std::string wdir = dir + "/weights";  // missing: write() creates it
  WeightPusher w(policy, at::kFloat, wdir, model_dir);
  const std::string v1 = w.write(1);
  EXPECT_EQ(v1, fs::absolute(wdir + "/policy_v000001").lexically_normal().string());
  EXPECT_EQ(entries(wdir), std::vector<std::string>{"policy_v000001"}) << "no .tmp left";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(v1 + "/" + f)) << f;
  // The servers load the learner's parameters, bit for bit (fp32 written, fp32 read).
  const model::Transformer back = model::load_pretrained(v1, at::kFloat, at::kCPU);
  const auto pa = policy->parameters(), pb = back->parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(at::equal(pa[i], pb[i])) << "tensor " << i;

  FakeLoadServer a, b;
  rollout::RemoteOptions o;
  o.urls = {a.url(), b.url()};
  o.retries = 0;
  rollout::RemoteGenerator gen(o);
  w.load(gen, v1, 1);
  for (FakeLoadServer* s : {&a, &b}) {
    const auto l = s->loads();
    ASSERT_EQ(l.size(), 1u);
    EXPECT_EQ(l[0]["model_path"], v1);
    EXPECT_EQ(l[0]["policy_version"], 1);
  }
  EXPECT_EQ(gen.policy_version(), 1);
  EXPECT_EQ(w.loaded_dir(), v1);

  // Version 2 written while 1 is loaded: both exist until 2 is loaded, then only 2.
  const std::string v2 = w.write(2);
  EXPECT_EQ(entries(wdir), (std::vector<std::string>{"policy_v000001", "policy_v000002"}));
  w.load(gen, v2, 2);
  EXPECT_EQ(entries(wdir), std::vector<std::string>{"policy_v000002"});

  // A server that refuses version 3: the error names it and its message; version 2 (what
  // the other server may still serve) stays, and the client still stamps 2.
  b.fail("disk quota exceeded");
  const std::string v3 = w.write(3);
  try {
    w.load(gen, v3, 3);
    FAIL() << "expected the refusal";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(b.url()), std::string::npos) << m;
    EXPECT_NE(m.find("disk quota exceeded"), std::string::npos) << m;
  }
  EXPECT_EQ(gen.policy_version(), 2);
  EXPECT_EQ(w.loaded_dir(), v2);
  EXPECT_EQ(entries(wdir), (std::vector<std::string>{"policy_v000002", "policy_v000003"}));
  w.discard(v3);  // never to be loaded
  EXPECT_EQ(entries(wdir), std::vector<std::string>{"policy_v000002"});

  // push(): write and load in one call.
  b.fail("");
  EXPECT_GE(w.push(gen, 4), 0.0);
  EXPECT_EQ(entries(wdir), std::vector<std::string>{"policy_v000004"});
  EXPECT_EQ(a.loads().back()["policy_version"], 4);
  fs::remove_all(dir);
}

TEST(WeightPushTest, AnUnwritableDirectoryNamesTheKey) {
  const std::string dir = testing::make_tiny_model_dir("wpushbad");
  const std::string model_dir = dir + "/model";
  model::Transformer policy = model::load_pretrained(model_dir, at::kFloat, at::kCPU);
  std::ofstream(dir + "/file") << "x";
  WeightPusher w(policy, at::kFloat, dir + "/file/weights", model_dir);  // below a regular file
  try {
    w.write(1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rollout.remote.weights_dir"), std::string::npos) << m;
    EXPECT_NE(m.find(dir + "/file/weights/policy_v000001"), std::string::npos) << m;
  }
  EXPECT_THROW(WeightPusher(policy, at::kFloat, "", model_dir), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace agentr1::train
