#include "agentr1/train/distributed/distributed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <future>
#include <sstream>
#include <type_traits>
#include <unordered_map>

// Debian's libtorch is built with Gloo; its header is guarded by the build's macro.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/flow/group_rollout.h"
#include "agentr1/train/learner/batch.h"

namespace agentr1::train {

using Clock = std::chrono::steady_clock;

namespace {

std::chrono::milliseconds to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.001, s) * 1000.0));
}

int env_int(const std::function<const char*(const char*)>& get, const char* name, int fallback, int lo, int hi) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  AGENTR1_CHECK(end != v && *end == '\0' && errno == 0 && x >= lo && x <= hi,
                "environment variable " << name << "='" << v << "' must be an integer in " << lo << ".." << hi
                                        << " (set by torchrun or `agentr1 launch`)");
  return static_cast<int>(x);
}

std::string rank_key(const char* what, int rank) { return std::string("agentr1/") + what + "/" + std::to_string(rank); }

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string diagnose_with_store(c10d::Store& store, const DistEnv& env, int64_t seq, const std::string& what,
                                double timeout_s);

// The network device Gloo binds: GLOO_SOCKET_IFNAME's interface when set (as torch
// does), loopback when the job is on this machine, else the address this host's name
// resolves to (createDeviceForHostname(MASTER_ADDR) would bind rank 0's address, which
// fails on every other machine).
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (master_addr == "127.0.0.1" || master_addr == "localhost" || master_addr == "::1")
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

std::optional<DistEnv> dist_env_from_environment(const std::function<const char*(const char*)>& get_in) {
  const std::function<const char*(const char*)> get =
      get_in ? get_in : std::function<const char*(const char*)>([](const char* n) { return std::getenv(n); });
  const char* ws = get("WORLD_SIZE");
  if (ws == nullptr || *ws == '\0') return std::nullopt;
  DistEnv e;
  e.world_size = env_int(get, "WORLD_SIZE", 1, 1, 1 << 20);
  AGENTR1_CHECK(get("RANK") != nullptr, "environment variable WORLD_SIZE=" << e.world_size
                << " is set but RANK is not: each process needs its RANK (0..WORLD_SIZE-1), as torchrun and "
                   "`agentr1 launch` set it");
  e.rank = env_int(get, "RANK", 0, 0, e.world_size - 1);
  e.local_world_size = env_int(get, "LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = env_int(get, "LOCAL_RANK", e.rank % e.local_world_size, 0, e.local_world_size - 1);
  const char* addr = get("MASTER_ADDR");
  if (addr != nullptr && *addr != '\0') e.master_addr = addr;
  e.master_port = env_int(get, "MASTER_PORT", 29500, 1, 65535);
  return e;
}

void DistOptions::validate() const {
  AGENTR1_CHECK(std::isfinite(timeout_s) && timeout_s > 0,
                "trainer.dist.timeout_s must be > 0 seconds, got " << timeout_s);
  AGENTR1_CHECK(check_freq >= 0, "trainer.dist.check_freq must be >= 0 (0 = off), got " << check_freq);
}

ProcessGroup::ProcessGroup(const DistEnv& env, double timeout_s) : env_(env), timeout_s_(timeout_s) {
  AGENTR1_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size,
                "data parallel: rank " << env.rank << " is not in 0.." << env.world_size - 1);
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env.master_port);
    so.isServer = env.rank == 0;
    so.numWorkers = static_cast<size_t>(env.world_size);
    so.waitWorkers = true;
    so.timeout = to_ms(timeout_s);
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    auto go = c10d::ProcessGroupGloo::Options::create(to_ms(timeout_s));
    go->devices.push_back(gloo_device(env.master_addr));
    go->threads = 1;
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env.rank, env.world_size, go);
  } catch (const std::exception& e) {
    throw Error("data parallel: rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                " could not join the process group at " + where + " within " + std::to_string(timeout_s) +
                " s: " + e.what() +
                "\nHINT: every rank needs the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE, rank 0 must be "
                "running and the port free on its host (`agentr1 launch --nproc N ...` sets them for one "
                "machine); across machines, this host's name must resolve to an address the others reach, or "
                "set GLOO_SOCKET_IFNAME to the interface to use");
  }
  // The heartbeat: its own thread and connection to the store (the main thread's may be
  // blocked in a collective), publishing a beat counter and how many collectives this
  // rank entered (peers read both to diagnose a failure). It shares only `beat` with
  // this object and is detached, so that a store that stops answering (rank 0 frozen)
  // can block it without blocking this rank's exit.
  beat_ = std::make_shared<Beat>();
  beat_done_ = beat_->done.get_future();
  std::thread([beat = beat_, addr = env.master_addr, port = env.master_port, rank = env.rank] {
    c10::intrusive_ptr<c10d::TCPStore> hb;
    int64_t published = 0;
    while (!beat->stop.load()) {
      try {
        if (!hb) {
          c10d::TCPStoreOptions so;
          so.port = static_cast<uint16_t>(port);
          so.isServer = false;
          so.waitWorkers = false;
          so.timeout = std::chrono::milliseconds(5000);
          hb = c10::make_intrusive<c10d::TCPStore>(addr, so);
        }
        hb->add(rank_key("heartbeat", rank), 1);
        const int64_t seq = beat->seq.load();
        if (seq != published) hb->add(rank_key("entered", rank), seq - published);
        published = seq;
      } catch (const std::exception&) {
        hb.reset();  // the store is unreachable for now: connect again on the next beat
      }
      for (int i = 0; i < 5 && !beat->stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    beat->done.set_value();
  }).detach();
  AGENTR1_LOG(INFO) << "data parallel: rank " << env.rank << " of " << env.world_size << " joined at " << where
                    << " (Gloo, collective timeout " << timeout_s << " s)";
}

ProcessGroup::~ProcessGroup() {
  beat_->stop.store(true);
  // Normally done within 0.5 s; a beat blocked on a store that does not answer is left
  // behind (it holds only its shared state).
  beat_done_.wait_for(std::chrono::seconds(2));
}

template <class F>
void ProcessGroup::collective(const std::string& what, F&& run) {
  const int64_t seq = ++seq_;
  beat_->seq.store(seq);  // published by the heartbeat
  try {
    run();
  } catch (const std::exception& e) {
    throw Error("data parallel: rank " + std::to_string(env_.rank) + ": collective #" + std::to_string(seq) + " (" +
                what + ") failed: " + e.what() + "\n" + diagnose(seq, what));
  }
}

std::string ProcessGroup::diagnose(int64_t seq, const std::string& what) {
  // Asks the store, in a thread of its own: a frozen rank 0 leaves store calls waiting.
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = result->get_future();
  std::thread([result, store = store_, env = env_, seq, what, timeout_s = timeout_s_] {
    result->set_value(diagnose_with_store(*store, env, seq, what, timeout_s));
  }).detach();
  if (answer.wait_for(std::chrono::seconds(12)) == std::future_status::ready) return answer.get();
  return "  rank 0 is not responding: its rendezvous store at " + env_.master_addr + ":" +
         std::to_string(env_.master_port) + " did not answer within 12 s (rank 0 is frozen, or its host "
         "unreachable)\n  the run stops on every rank; resume it with the same command and --resume";
}

namespace {

std::string diagnose_with_store(c10d::Store& store, const DistEnv& env, int64_t seq, const std::string& what,
                                double timeout_s) {
  std::ostringstream os;
  auto* store_ = &store;
  const DistEnv& env_ = env;
  const double timeout_s_ = timeout_s;
  try {
    store_->setTimeout(std::chrono::milliseconds(3000));
    std::vector<int> failed;
    for (int q = 0; q < env_.world_size; ++q) {
      if (q == env_.rank) continue;
      if (store_->check({rank_key("failed", q)})) {
        const std::vector<uint8_t> msg = store_->get(rank_key("failed", q));
        os << "  rank " << q << " failed: " << std::string(msg.begin(), msg.end()) << "\n";
        failed.push_back(q);
      }
    }
    if (!failed.empty()) return os.str() + "  the run stops on every rank";
    std::vector<int64_t> beat0(env_.world_size, 0);
    for (int q = 0; q < env_.world_size; ++q) beat0[q] = store_->add(rank_key("heartbeat", q), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    std::vector<int> silent, behind;
    for (int q = 0; q < env_.world_size; ++q) {
      if (q == env_.rank) continue;
      if (store_->add(rank_key("heartbeat", q), 0) == beat0[q]) silent.push_back(q);
      else if (store_->add(rank_key("entered", q), 0) < seq) behind.push_back(q);
    }
    for (int q : silent)
      os << "  rank " << q << " is not responding (no heartbeat for 2 s): it exited, was killed or is stopped; "
         << "its own log says why\n";
    for (int q : behind)
      os << "  rank " << q << " is alive but has not reached collective #" << seq << " (" << what
         << "): it hangs, or is slower than trainer.dist.timeout_s (" << timeout_s_ << " s) allows\n";
    if (silent.empty() && behind.empty())
      os << "  every other rank is alive and reached this collective; the failure is in the transport\n";
  } catch (const std::exception&) {
    os << "  rank 0 is not responding: its rendezvous store at " << env_.master_addr << ":" << env_.master_port
       << " is unreachable (rank 0 exited or was killed; its own log says why)\n";
  }
  return os.str() + "  the run stops on every rank; resume it with the same command and --resume";
}

}  // namespace

void ProcessGroup::all_reduce_sum(at::Tensor& t, const std::string& what) {
  collective(what, [&] {
    std::vector<at::Tensor> ts{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    pg_->allreduce(ts, o)->wait();
  });
}

void ProcessGroup::all_reduce_max(at::Tensor& t, const std::string& what) {
  collective(what, [&] {
    std::vector<at::Tensor> ts{t};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    pg_->allreduce(ts, o)->wait();
  });
}

double ProcessGroup::all_reduce_sum(double x, const std::string& what) {
  at::Tensor t = at::full({1}, x, at::kDouble);
  all_reduce_sum(t, what);
  return t.item<double>();
}

double ProcessGroup::all_reduce_max(double x, const std::string& what) {
  at::Tensor t = at::full({1}, x, at::kDouble);
  all_reduce_max(t, what);
  return t.item<double>();
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& mine, const std::string& what) {
  const int w = env_.world_size;
  std::vector<std::vector<at::Tensor>> sizes_out(1);
  for (int q = 0; q < w; ++q) sizes_out[0].push_back(at::zeros({1}, at::kLong));
  std::vector<at::Tensor> size_in{at::full({1}, static_cast<int64_t>(mine.size()), at::kLong)};
  collective(what + ": sizes", [&] { pg_->allgather(sizes_out, size_in)->wait(); });
  int64_t longest = 0;
  std::vector<int64_t> sizes(w);
  for (int q = 0; q < w; ++q) longest = std::max(longest, sizes[q] = sizes_out[0][q].item<int64_t>());
  at::Tensor in = at::zeros({std::max<int64_t>(1, longest)}, at::kByte);
  std::copy(mine.begin(), mine.end(), in.data_ptr<uint8_t>());
  std::vector<std::vector<at::Tensor>> out(1);
  for (int q = 0; q < w; ++q) out[0].push_back(at::zeros_like(in));
  std::vector<at::Tensor> ins{in};
  collective(what, [&] { pg_->allgather(out, ins)->wait(); });
  std::vector<std::string> r(w);
  for (int q = 0; q < w; ++q) {
    const uint8_t* p = out[0][q].data_ptr<uint8_t>();
    r[q].assign(p, p + sizes[q]);
  }
  return r;
}

void ProcessGroup::barrier(const std::string& what) {
  // An all-reduce rather than Gloo's barrier: the same failure paths as every other collective.
  all_reduce_sum(0.0, what);
}

void ProcessGroup::report_failure(const std::string& message) {
  try {
    store_->setTimeout(std::chrono::milliseconds(2000));
    store_->set(rank_key("failed", env_.rank), bytes_of(message.substr(0, 2000)));
  } catch (const std::exception&) {
    // the store is gone: the peers will see this rank's heartbeat stop instead
  }
}

int rollout_owner(int64_t t, int64_t total, int world_size) {
  return static_cast<int>((t * world_size) / std::max<int64_t>(1, total));
}

std::vector<int64_t> owned_indices(int64_t total, const ProcessGroup& pg) {
  std::vector<int64_t> out;
  for (int64_t t = 0; t < total; ++t)
    if (rollout_owner(t, total, pg.world_size()) == pg.rank()) out.push_back(t);
  return out;
}

std::vector<Trajectory> run_group_rollouts_dp(const std::vector<Sample>& samples, int n, const flow::FlowContext& ctx,
                                              const flow::FlowOptions& opts, uint64_t seed, ThreadPool& drivers,
                                              ProcessGroup& pg) {
  AGENTR1_CHECK(n >= 1, "rollout n (trajectories per sample) must be >= 1, got " << n);
  const int64_t total = static_cast<int64_t>(samples.size()) * n;
  const std::vector<int64_t> mine = owned_indices(total, pg);
  const std::vector<Trajectory> out = flow::run_group_rollouts_subset(samples, n, mine, ctx, opts, seed, drivers);
  return gather_trajectories(out, mine, total, pg);
}

std::vector<Trajectory> gather_trajectories(const std::vector<Trajectory>& mine, const std::vector<int64_t>& indices,
                                            int64_t total, ProcessGroup& pg) {
  AGENTR1_CHECK(mine.size() == indices.size(), "gather_trajectories: " << mine.size() << " trajectories for "
                                                                        << indices.size() << " indices");
  json j = json::array();
  for (size_t k = 0; k < mine.size(); ++k) j.push_back({indices[k], mine[k].to_json()});
  // CBOR keeps every float exactly, NaN and infinities included (JSON text would not).
  const std::vector<uint8_t> cbor = json::to_cbor(j);
  const std::vector<std::string> parts =
      pg.all_gather_bytes(std::string(cbor.begin(), cbor.end()), "trajectories");
  std::vector<Trajectory> all(static_cast<size_t>(total));
  std::vector<uint8_t> seen(static_cast<size_t>(total), 0);
  for (size_t q = 0; q < parts.size(); ++q) {
    const json p = json::from_cbor(parts[q]);
    for (const auto& e : p) {
      const int64_t t = e.at(0).get<int64_t>();
      AGENTR1_CHECK(t >= 0 && t < total && !seen[static_cast<size_t>(t)],
                    "gather_trajectories: rank " << q << " sent trajectory " << t << " (out of 0.." << total - 1
                                                 << " or sent twice)");
      seen[static_cast<size_t>(t)] = 1;
      all[static_cast<size_t>(t)] = Trajectory::from_json(e.at(1));
    }
  }
  for (int64_t t = 0; t < total; ++t)
    AGENTR1_CHECK(seen[static_cast<size_t>(t)], "gather_trajectories: no rank sent trajectory " << t);
  return all;
}

namespace {

// One column of `width` values per token (ids or floats), filled on the ranks that own
// each row, summed over the ranks: every entry is non-zero on at most one rank, so the
// sum is exact. A column no owned row has on any rank is skipped (not computed).
template <class T>
void share_column(std::vector<PackedRow>& rows, const std::vector<uint8_t>& owned, std::vector<T> PackedRow::*col,
                  const char* name, ProcessGroup& pg) {
  // Values per token: the same on every rank (one config); 0 = not computed anywhere.
  double width = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (owned[i] && !(rows[i].*col).empty() && !rows[i].tokens.empty())
      width = std::max(width, static_cast<double>((rows[i].*col).size() / rows[i].tokens.size()));
  const int64_t w = static_cast<int64_t>(pg.all_reduce_max(width, "row columns: present"));
  if (w == 0) return;
  int64_t total = 0;
  for (const auto& r : rows) total += static_cast<int64_t>(r.tokens.size()) * w;
  constexpr bool kInt = std::is_same_v<T, int32_t>;
  at::Tensor flat = at::zeros({std::max<int64_t>(1, total)}, kInt ? at::kInt : at::kFloat);
  T* p = flat.data_ptr<T>();
  int64_t off = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& v = rows[i].*col;
    const int64_t n = static_cast<int64_t>(rows[i].tokens.size()) * w;
    if (owned[i]) {
      AGENTR1_CHECK(static_cast<int64_t>(v.size()) == n, "share_row_columns: row " << i << " has " << v.size() << " "
                                                            << name << " values for " << rows[i].tokens.size()
                                                            << " tokens x " << w);
      std::copy(v.begin(), v.end(), p + off);
    }
    off += n;
  }
  pg.all_reduce_sum(flat, std::string("row columns: ") + name);
  off = 0;
  for (auto& r : rows) {
    const int64_t n = static_cast<int64_t>(r.tokens.size()) * w;
    (r.*col).assign(p + off, p + off + n);
    off += n;
  }
}

}  // namespace

void share_row_columns(std::vector<PackedRow>& rows, const std::vector<uint8_t>& owned,
                       const std::vector<std::vector<float> PackedRow::*>& columns, ProcessGroup& pg) {
  AGENTR1_CHECK(owned.size() == rows.size(), "share_row_columns: " << owned.size() << " flags for " << rows.size()
                                                                    << " rows");
  for (auto col : columns) share_column(rows, owned, col, "log-probs", pg);
}

void share_teacher_topk(std::vector<PackedRow>& rows, const std::vector<uint8_t>& owned, ProcessGroup& pg) {
  AGENTR1_CHECK(owned.size() == rows.size(), "share_teacher_topk: " << owned.size() << " flags for " << rows.size()
                                                                     << " rows");
  share_column(rows, owned, &PackedRow::teacher_topk_ids, "teacher top-k ids", pg);
  share_column(rows, owned, &PackedRow::teacher_topk_logprob, "teacher top-k log-probs", pg);
}

std::vector<uint8_t> update_share(const std::vector<PackedRow>& rows, const std::vector<int64_t>& mini, int rank,
                                  int world_size) {
  std::unordered_map<int64_t, int64_t> order;  // trajectory -> position of first appearance
  for (int64_t r : mini) order.try_emplace(rows[r].trajectory, static_cast<int64_t>(order.size()));
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<uint8_t> mine(mini.size(), 0);
  for (size_t i = 0; i < mini.size(); ++i)
    mine[i] = rollout_owner(order.at(rows[mini[i]].trajectory), n, world_size) == rank;
  return mine;
}

namespace {

std::vector<std::map<std::string, double>> gather_metrics(const std::map<std::string, double>& mine, ProcessGroup& pg,
                                                          const std::string& what) {
  json j = json::object();
  for (const auto& [k, v] : mine) j[k] = v;
  std::vector<std::map<std::string, double>> all;
  const std::vector<uint8_t> cbor = json::to_cbor(j);
  for (const std::string& s : pg.all_gather_bytes(std::string(cbor.begin(), cbor.end()), what)) {
    std::map<std::string, double> m;
    const json parsed = json::from_cbor(s);
    for (auto it = parsed.begin(); it != parsed.end(); ++it) m[it.key()] = it->is_number() ? it->get<double>() : NAN;
    all.push_back(std::move(m));
  }
  return all;
}

}  // namespace

std::map<std::string, double> reduce_metrics(const std::map<std::string, double>& mine,
                                             const std::vector<std::string>& sum_keys, ProcessGroup& pg,
                                             const std::string& what) {
  std::map<std::string, double> out;
  std::map<std::string, int> count;
  for (const auto& m : gather_metrics(mine, pg, what))
    for (const auto& [k, v] : m) {
      const bool is_max = k.find("max") != std::string::npos || k.rfind("timing/", 0) == 0;
      auto [it, fresh] = out.try_emplace(k, v);
      if (!fresh) it->second = is_max ? std::max(it->second, v) : it->second + v;
      count[k]++;
    }
  for (auto& [k, v] : out) {
    const bool is_max = k.find("max") != std::string::npos || k.rfind("timing/", 0) == 0;
    const bool is_sum = std::find(sum_keys.begin(), sum_keys.end(), k) != sum_keys.end();
    if (!is_max && !is_sum) v /= count[k];
  }
  return out;
}

std::map<std::string, double> sum_metrics(const std::map<std::string, double>& mine, ProcessGroup& pg,
                                          const std::string& what) {
  std::map<std::string, double> out;
  for (const auto& m : gather_metrics(mine, pg, what))
    for (const auto& [k, v] : m) out[k] += v;
  return out;
}

void GradientAllReduce::reduce(std::vector<at::Tensor>& params) {
  const auto t0 = Clock::now();
  // One flat buffer: every trainable parameter's gradient (zeros where this rank has
  // none), then one flag per parameter saying whether this rank had one. A gradient no
  // rank defined stays undefined, as in one process (AdamW then leaves the parameter be).
  std::vector<at::Tensor*> trainable;
  for (auto& p : params)
    if (p.requires_grad()) trainable.push_back(&p);
  if (trainable.empty()) return;
  std::vector<at::Tensor> parts;
  for (at::Tensor* p : trainable)
    parts.push_back(p->grad().defined() ? p->grad().reshape({-1}).to(at::kCPU, at::kFloat)
                                        : at::zeros({p->numel()}, at::kFloat));
  at::Tensor flags = at::zeros({static_cast<int64_t>(trainable.size())}, at::kFloat);
  for (size_t i = 0; i < trainable.size(); ++i) flags[static_cast<int64_t>(i)] = trainable[i]->grad().defined() ? 1.0f : 0.0f;
  parts.push_back(flags);
  at::Tensor flat = at::cat(parts);
  pg_.all_reduce_sum(flat, what_);
  const at::Tensor summed_flags = flat.slice(0, flat.numel() - static_cast<int64_t>(trainable.size()));
  int64_t off = 0;
  for (size_t i = 0; i < trainable.size(); ++i) {
    at::Tensor& p = *trainable[i];
    const int64_t n = p.numel();
    if (summed_flags[static_cast<int64_t>(i)].item<float>() > 0) {
      const at::Tensor g = flat.slice(0, off, off + n).view(p.sizes()).to(p.device(), p.scalar_type());
      if (p.grad().defined()) p.mutable_grad().copy_(g);
      else p.mutable_grad() = g.clone();
    }
    off += n;
  }
  seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

void check_same_parameters(const std::vector<at::Tensor>& params, ProcessGroup& pg, const std::string& what) {
  at::NoGradGuard ng;
  double s = 0, q = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor d = params[i].detach().to(at::kCPU, at::kDouble);
    s += d.sum().item<double>() * static_cast<double>(i + 1);
    q += d.square().sum().item<double>();
  }
  std::ostringstream mine;
  mine.precision(17);
  mine << s << " " << q;
  const std::vector<std::string> all = pg.all_gather_bytes(mine.str(), what);
  std::string differ;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r) + " (" + all[r] + ")";
  AGENTR1_CHECK(differ.empty(), "data parallel: " << what << ": the parameters of rank(s) " << differ
                                                  << " differ from rank 0's (" << all[0]
                                                  << "); the ranks no longer train the same model. This is a bug: "
                                                     "please report it with the run's config.yaml");
}

}  // namespace agentr1::train
