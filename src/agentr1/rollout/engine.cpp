#include "agentr1/rollout/engine.h"

#include "agentr1/model/decode_layout.h"
#include "agentr1/model/huge_pages.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <ATen/Parallel.h>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/rollout/sampler.h"

namespace agentr1::rollout {

struct Engine::Sequence {
  explicit Sequence(GenRequest r)
      : req(std::move(r)), sampler(req.sampling), prompt_len(static_cast<int>(req.prompt_ids.size())) {
    tokens = req.prompt_ids;
  }
  GenRequest req;
  Sampler sampler;
  std::promise<GenResult> promise;
  int prompt_len;
  TokenIds tokens;  // prompt + generated; the KV blocks hold tokens[0, kv.len)
  BlockPool::Seq kv;
  bool started = false;  // holds blocks
  GenResult result;
  bool done = false;
};

void EngineOptions::validate() const {
  AGENTR1_CHECK(max_batch >= 1, "EngineOptions.max_batch must be >= 1, got " << max_batch);
  AGENTR1_CHECK(max_context >= 2, "EngineOptions.max_context must be >= 2 (a prompt token and a "
                                  "generated one), got " << max_context);
  AGENTR1_CHECK(block_size >= 1, "EngineOptions.block_size must be >= 1, got " << block_size);
  const int per_seq = (max_context + std::max(1, block_size) - 1) / std::max(1, block_size);
  AGENTR1_CHECK(n_blocks == 0 || n_blocks >= per_seq,
                "EngineOptions.n_blocks must be 0 (auto) or hold one max_context sequence ("
                    << per_seq << " blocks of " << block_size << "), got " << n_blocks);
  AGENTR1_CHECK(prefill_chunk >= 1,
                "EngineOptions.prefill_chunk must be >= 1, got " << prefill_chunk);
  AGENTR1_CHECK(nice >= 0 && nice <= 19, "EngineOptions.nice must be in 0..19, got " << nice);
  AGENTR1_CHECK(threads >= 0, "EngineOptions.threads must be >= 0 (0 = the creator's), got " << threads);
}

namespace {

EngineOptions resolve(EngineOptions o, model::Transformer& m) {
  o.validate();
  AGENTR1_CHECK(!m.is_empty(), "rollout::Engine: the model is empty (null module handle)");
  const auto& cfg = m->config();
  AGENTR1_CHECK(o.max_context <= cfg.max_position_embeddings,
                "EngineOptions.max_context (" << o.max_context
                    << ") exceeds the model's max_position_embeddings ("
                    << cfg.max_position_embeddings << "); lower max_context");
  if (o.n_blocks == 0)
    o.n_blocks = (o.max_context + o.block_size - 1) / o.block_size * o.max_batch * (o.prefix_cache ? 2 : 1);
  auto params = m->parameters();
  AGENTR1_CHECK(!params.empty(), "rollout::Engine: the model has no parameters");
  const at::ScalarType model_dtype = params.front().scalar_type();
  if (!o.kv_dtype) o.kv_dtype = model_dtype;
  // model::Transformer::forward_cached requires the cache in the weights' dtype.
  AGENTR1_CHECK(*o.kv_dtype == model_dtype,
                "EngineOptions.kv_dtype " << c10::toString(*o.kv_dtype)
                                          << " differs from the model's weights ("
                                          << c10::toString(model_dtype)
                                          << "); the model computes attention in its own dtype: "
                                             "leave kv_dtype unset or load the model in that dtype");
  if (o.batch_invariant && !params.front().device().is_cpu()) {
    AGENTR1_LOG(WARN) << "rollout engine: batch_invariant is on but the model is on " << params.front().device()
                      << ", and the batch-invariant kernels run on the CPU only: turned off (outputs may depend on "
                         "batching in the last bits; set rollout.batch_invariant=false to silence this)";
    o.batch_invariant = false;
  }
  return o;
}

at::Device model_device(model::Transformer& m) {
  auto params = m->parameters();
  return params.empty() ? at::Device(at::kCPU) : params.front().device();
}

int common_prefix(const TokenIds& a, size_t a_len, const TokenIds& b, size_t b_len, size_t cap) {
  const size_t n = std::min({a_len, b_len, cap});
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int>(i);
}

}  // namespace

Engine::Engine(model::Transformer model, EngineOptions options)
    : model_(std::move(model)),
      options_(resolve(std::move(options), model_)),
      vocab_(model_->config().vocab_size),
      device_(model_device(model_)),
      cache_(model_->config(), options_.n_blocks, options_.block_size, *options_.kv_dtype, device_),
      pool_(options_.n_blocks, options_.block_size, options_.prefix_cache) {
  cache_.batch_invariant = options_.batch_invariant;
  if (options_.huge_pages && device_.is_cpu()) {
    const model::HugePageReport hp = model::place_in_huge_pages(*model_);
    if (hp.tensors > 0) {
      AGENTR1_LOG(INFO) << "rollout engine: " << hp.tensors << " weight tensors (" << hp.bytes / (1024 * 1024)
                        << " MiB) moved into memory advised for huge pages (THP '" << hp.thp_mode << "': "
                        << (hp.huge_bytes < 0 ? std::string("unknown") : std::to_string(hp.huge_bytes / (1024 * 1024)))
                        << " MiB on huge pages)";
    }
  }
  packed_on_ = options_.packed_decode && options_.batch_invariant && device_.is_cpu();
  stats_.kv_blocks = options_.n_blocks;
  stats_.kv_block_bytes = static_cast<int64_t>(cache_.bytes() / static_cast<size_t>(options_.n_blocks));
  AGENTR1_LOG(INFO) << "rollout engine: max_batch " << options_.max_batch << ", max_context "
                    << options_.max_context << ", " << options_.n_blocks << " KV blocks x "
                    << options_.block_size << " positions ("
                    << cache_.bytes() / (1024.0 * 1024.0) << " MiB, " << c10::toString(*options_.kv_dtype)
                    << "), prefix cache " << (options_.prefix_cache ? "on" : "off")
                    << (options_.batch_invariant ? ", batch-invariant" : "");
  // OpenMP keeps a thread count per OS thread: the worker uses its creator's
  // (at::set_num_threads), not the library default of one per core.
  // The worker computes with its creator's thread count (at::get_num_threads()): on
  // the CPU through a SpinPool, with one OpenMP thread of its own (see engine.h).
  const int threads = options_.threads > 0 ? options_.threads : at::get_num_threads();
  threads_ = threads;
  active_threads_ = threads;
  if (threads > 1 && device_.is_cpu())
    spin_ = std::make_unique<model::SpinPool>(threads, /*idle_us=*/2000, options_.nice);
  worker_ = std::thread([this, threads] {
    if (!model::set_thread_nice(options_.nice)) {
      AGENTR1_LOG(WARN) << "rollout engine: could not lower the worker's priority to nice " << options_.nice;
    }
    at::set_num_threads(spin_ ? 1 : threads);
    worker_loop();
  });
}

void Engine::set_threads(int threads) {
  AGENTR1_CHECK(threads >= 1, "Engine::set_threads: threads must be >= 1, got " << threads);
  threads_.store(threads);
}

void Engine::adopt_threads() {
  const int want = threads_.load();
  if (want == active_threads_.load()) return;
  if (!device_.is_cpu()) {
    at::set_num_threads(want);
  } else {
    spin_.reset();  // joins its helpers
    if (want > 1) spin_ = std::make_unique<model::SpinPool>(want, /*idle_us=*/2000, options_.nice);
    at::set_num_threads(1);  // the worker's own OpenMP count (the pool has the others)
  }
  active_threads_ = spin_ ? spin_->threads() : want;
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::future<GenResult> Engine::submit(GenRequest request) {
  const TokenIds& p = request.prompt_ids;
  AGENTR1_CHECK(!p.empty(), "GenRequest.prompt_ids is empty; a prompt needs at least one token");
  AGENTR1_CHECK(static_cast<int64_t>(p.size()) < options_.max_context,
                "prompt has " << p.size() << " tokens but the engine's max_context is "
                              << options_.max_context
                              << " (prompt + generated tokens, at least one generated); shorten the "
                                 "prompt or raise EngineOptions.max_context");
  for (size_t i = 0; i < p.size(); ++i)
    AGENTR1_CHECK(p[i] >= 0 && p[i] < vocab_, "prompt_ids[" << i << "] = " << p[i]
                                                            << " is outside the vocabulary [0, "
                                                            << vocab_ << ")");
  const SamplingParams& sp = request.sampling;
  validate_sampling(sp);
  for (size_t i = 0; i < sp.stop_token_ids.size(); ++i)
    AGENTR1_CHECK(sp.stop_token_ids[i] >= 0 && sp.stop_token_ids[i] < vocab_,
                  "sampling.stop_token_ids[" << i << "] = " << sp.stop_token_ids[i]
                                             << " is outside the vocabulary [0, " << vocab_ << ")");
  for (size_t i = 0; i < sp.stop_strings.size(); ++i)
    AGENTR1_CHECK(!sp.stop_strings[i].empty(), "sampling.stop_strings[" << i << "] is empty");
  AGENTR1_CHECK(sp.stop_strings.empty() || options_.detokenize,
                "request has " << sp.stop_strings.size()
                               << " stop string(s) but the engine has no detokenize function; set "
                                  "EngineOptions.detokenize or use stop_token_ids");

  auto seq = std::make_unique<Sequence>(std::move(request));
  std::future<GenResult> fut = seq->promise.get_future();
  {
    std::lock_guard<std::mutex> lk(mu_);
    AGENTR1_CHECK(!stop_, "rollout engine is shutting down; request rejected");
    incoming_.push_back(std::move(seq));
    ++stats_.requests_submitted;
  }
  cv_work_.notify_one();
  return fut;
}

void Engine::pause() { pause_marking(true); }

void Engine::pause_marking(bool weights_may_change) {
  std::unique_lock<std::mutex> lk(mu_);
  ++pause_count_;
  cv_idle_.wait(lk, [this] { return !busy_; });
  if (weights_may_change) packed_stale_ = true;  // the caller may touch the weights while paused
}

void Engine::resume() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    AGENTR1_CHECK(pause_count_ > 0, "Engine::resume() called without a matching pause()");
    --pause_count_;
  }
  cv_work_.notify_all();
}

void Engine::with_model(const std::function<void(model::Transformer&)>& fn) {
  run_paused(/*weights_may_change=*/true, fn);  // even if fn throws
}

void Engine::with_model_read(const std::function<void(model::Transformer&)>& fn) {
  run_paused(/*weights_may_change=*/false, fn);
}

void Engine::run_paused(bool weights_may_change, const std::function<void(model::Transformer&)>& fn) {
  pause_marking(weights_may_change);
  try {
    fn(model_);
  } catch (...) {
    resume();
    throw;
  }
  resume();
}

const model::DecodeLayout* Engine::decode_layout() {
  if (!packed_on_) return nullptr;
  if (packed_ && !packed_stale_) return packed_.get();  // the common step: nothing to do
  try {
    const std::vector<at::Tensor> weights = model_->decode_weights();
    if (packed_ && packed_stale_ && !packed_->holds(weights)) packed_.reset();  // the parameters were replaced
    if (!packed_) {
      const int64_t need = model::DecodeLayout::bytes_needed(weights), avail = model::mem_available_bytes();
      if (avail >= 0 && need + (int64_t{1} << 30) > avail) {
        AGENTR1_LOG(WARN) << "rollout engine: not copying the weights into the decode layout: it needs "
                          << need / (1024 * 1024) << " MiB and " << avail / (1024 * 1024)
                          << " MiB are available (MemAvailable; at least 1 GiB must remain); one-sequence "
                             "steps read the weights themselves (the same results, slower at batch 1; "
                             "packed_decode=false skips the attempt)";
        packed_on_ = false;
        return nullptr;
      }
      packed_stale_ = false;
      packed_ = std::make_unique<model::DecodeLayout>(weights, spin_.get());
      AGENTR1_LOG(INFO) << "rollout engine: " << packed_->weights() << " weight tensors ("
                        << packed_->bytes() / (1024 * 1024)
                        << " MiB) copied into the decode layout for steps that decode one sequence alone "
                           "(packed_decode; the same bits)";
    } else if (packed_stale_.exchange(false)) {
      packed_->repack(spin_.get());
    } else {
      return packed_.get();
    }
  } catch (const std::exception& e) {
    AGENTR1_LOG(WARN) << "rollout engine: could not copy the weights into the decode layout (" << e.what()
                      << "); decoding reads the weights themselves from now on (the same results, slower at "
                         "batch 1; set packed_decode=false to skip the attempt)";
    packed_.reset();
    packed_on_ = false;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(mu_);
  ++stats_.decode_layout_packs;
  stats_.decode_layout_bytes = packed_->bytes();
  return packed_.get();
}

void Engine::with_model_drained(const std::function<void(model::Transformer&)>& fn) {
  {
    std::unique_lock<std::mutex> lk(mu_);
    ++hold_count_;
    cv_work_.notify_all();
    cv_idle_.wait(lk, [this] { return !busy_ && running_count_ == 0; });
    ++pause_count_;
  }
  packed_stale_ = true;  // fn may change the weights
  auto release = [this] {
    {
      std::lock_guard<std::mutex> lk(mu_);
      --pause_count_;
      --hold_count_;
    }
    cv_work_.notify_all();
  };
  try {
    fn(model_);
  } catch (...) {
    release();
    throw;
  }
  release();
}

void Engine::set_policy_version(int64_t version) {
  packed_stale_ = true;  // a new version: new weights
  std::lock_guard<std::mutex> lk(mu_);
  policy_version_ = version;
}

int64_t Engine::policy_version() const {
  std::lock_guard<std::mutex> lk(mu_);
  return policy_version_;
}

void Engine::clear_prefix_cache() {
  std::lock_guard<std::mutex> lk(mu_);
  clear_requested_ = true;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void Engine::reset_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  const EngineStats keep = stats_;
  stats_ = EngineStats{};
  stats_.kv_blocks = keep.kv_blocks;
  stats_.kv_block_bytes = keep.kv_block_bytes;
  stats_.decode_layout_bytes = keep.decode_layout_bytes;
}

// ---------------------------------------------------------------------------------
// Worker

void Engine::worker_loop() {
  torch::NoGradGuard no_grad;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      busy_ = false;
      running_count_ = running_.size();
      cv_idle_.notify_all();
      cv_work_.wait(lk, [this] {
        return stop_ || (pause_count_ == 0 && (!running_.empty() || (hold_count_ == 0 &&
                                                                     (!incoming_.empty() || !waiting_.empty()))));
      });
      if (stop_) break;
      busy_ = true;
      hold_ = hold_count_ > 0;
      while (!incoming_.empty()) {
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      if (clear_requested_) {
        clear_requested_ = false;
        pool_.clear_cached();
      }
    }
    try {
      adopt_threads();
      iterate();
    } catch (const std::exception& e) {
      // Not expected (model errors are caught per batch); keep the engine alive.
      AGENTR1_LOG(ERROR) << "rollout engine: iteration failed: " << e.what();
      for (auto& s : running_)
        if (!s->done) fail(*s, std::string("rollout engine iteration failed: ") + e.what());
      remove_done();
    }
  }
  // Shutdown: fail everything not finished.
  const std::string why = "rollout engine shut down before the request finished";
  for (auto& s : running_)
    if (!s->done) fail(*s, why);
  running_.clear();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto* q : {&waiting_, &incoming_}) {
    for (auto& s : *q) {
      s->promise.set_exception(std::make_exception_ptr(Error(why)));
      ++stats_.requests_failed;
    }
    q->clear();
  }
  busy_ = false;
  cv_idle_.notify_all();
}

void Engine::iterate() {
  int budget = options_.prefill_chunk;
  std::vector<std::pair<Sequence*, int>> plan;  // (sequence, prompt tokens to compute now)
  std::vector<Sequence*> planned;
  // Unfinished prefills first, in admission order.
  for (auto& sp : running_) {
    Sequence& s = *sp;
    const int have = s.kv.len;
    if (have >= s.prompt_len) continue;
    if (budget == 0) break;
    const int n = std::min(s.prompt_len - have, budget);
    plan.emplace_back(&s, n);
    planned.push_back(&s);
    budget -= n;
  }
  // Then new requests, FIFO, while there is budget and room in the batch.
  while (!hold_ && budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < options_.max_batch) {
    Sequence& s = *waiting_.front();
    if (!admit(s, planned)) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    const int n = std::min(s.prompt_len - s.kv.len, budget);
    plan.emplace_back(&s, n);
    planned.push_back(&s);
    budget -= n;
  }
  if (!plan.empty()) run_prefill(plan);
  run_decode();
  remove_done();
}

bool Engine::admit(Sequence& s, const std::vector<Sequence*>& planned) {
  const int bs = options_.block_size;
  const int cap = s.prompt_len - 1;  // the last prompt token is always computed: its logits are needed
  BlockPool::Match m;
  if (options_.prefix_cache) {
    m = pool_.longest_prefix(s.tokens, cap);
    // A prompt being computed in this iteration would share more: wait for it.
    for (const Sequence* p : planned)
      if (common_prefix(s.tokens, s.tokens.size(), p->tokens, p->prompt_len, cap) > m.len(bs)) return false;
  }
  const int need = std::min(s.prompt_len + s.req.sampling.max_new_tokens, options_.max_context);
  BlockPool::Copy copy;
  if (!pool_.start(s.kv, m, need, &copy)) return false;  // waits for blocks to be released
  s.started = true;
  if (copy.src >= 0) cache_.copy_block(copy.src, copy.dst, copy.n);
  std::lock_guard<std::mutex> lk(mu_);
  s.result.policy_version = policy_version_;
  stats_.prompt_tokens += s.prompt_len;
  stats_.prefill_tokens_reused += s.kv.len;
  stats_.kv_blocks_peak = std::max<int64_t>(stats_.kv_blocks_peak, pool_.n_in_use());
  return true;
}

void Engine::run_prefill(const std::vector<std::pair<Sequence*, int>>& plan) {
  // One forward call for every planned chunk: the rows' tokens are concatenated, so
  // rows of different lengths cost no padding.
  std::vector<model::CachedRow> rows;
  std::vector<int64_t> ids;
  for (const auto& [sp, n] : plan) {
    Sequence& s = *sp;
    pool_.grow(s.kv, s.kv.len + n);
    rows.push_back({s.kv.len, n, &s.kv.table});
    ids.insert(ids.end(), s.tokens.begin() + s.kv.len, s.tokens.begin() + s.kv.len + n);
  }
  at::Tensor logits;
  try {
    at::Tensor t = at::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, at::kLong);
    logits = model_->forward_cached(t.to(device_, false, /*copy=*/true), rows, cache_, spin_.get())
                 .to(at::kCPU, at::kFloat)
                 .contiguous();  // [b, V]
  } catch (const std::exception& e) {
    AGENTR1_LOG(WARN) << "rollout engine: prefill forward failed, failing " << plan.size()
                      << " request(s): " << e.what();
    for (const auto& [sp, n] : plan) fail(*sp, std::string("rollout engine: prefill forward failed: ") + e.what());
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.prefill_calls;
    stats_.prefill_tokens_computed += static_cast<int64_t>(ids.size());
    stats_.kv_blocks_peak = std::max<int64_t>(stats_.kv_blocks_peak, pool_.n_in_use());
  }
  const int64_t vocab = logits.size(1);
  const float* lp = logits.data_ptr<float>();
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *plan[i].first;
    const int n = plan[i].second;
    pool_.append(s.kv, s.tokens.data() + s.kv.len, n);
    if (s.kv.len < s.prompt_len) continue;  // more chunks to go
    try {
      SampledToken t = s.sampler.sample(lp + i * vocab, vocab);
      accept_token(s, t.id, t.logprob);
    } catch (const std::exception& e) {
      fail(s, std::string("rollout engine: sampling failed: ") + e.what());
    }
  }
}

void Engine::run_decode() {
  std::vector<Sequence*> rows;
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (!s.done && static_cast<size_t>(s.kv.len) + 1 == s.tokens.size()) rows.push_back(&s);
  }
  if (rows.empty()) return;
  const int64_t b = static_cast<int64_t>(rows.size());
  at::Tensor ids = at::empty({b}, at::TensorOptions().dtype(at::kLong));
  int64_t* idp = ids.data_ptr<int64_t>();
  std::vector<model::CachedRow> crows(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    Sequence& s = *rows[r];
    idp[r] = s.tokens.back();
    pool_.grow(s.kv, s.kv.len + 1);
    crows[r] = {s.kv.len, 1, &s.kv.table};
  }
  at::Tensor logits;
  const model::DecodeLayout* packed = b == 1 ? decode_layout() : nullptr;
  try {
    logits = model_->forward_cached(ids.to(device_), crows, cache_, spin_.get(), packed)
                 .to(at::kCPU, at::kFloat)
                 .contiguous();  // [b, V]
  } catch (const std::exception& e) {
    AGENTR1_LOG(WARN) << "rollout engine: decode forward failed, failing " << b
                      << " request(s): " << e.what();
    for (Sequence* s : rows) fail(*s, std::string("rollout engine: decode forward failed: ") + e.what());
    return;
  }
  for (Sequence* s : rows) pool_.append(s->kv, &s->tokens.back(), 1);
  const int64_t vocab = logits.size(1);
  const float* lp = logits.data_ptr<float>();
  // Rows sample independently (each from its own RNG), so in parallel.
  std::vector<SampledToken> out(rows.size());
  std::vector<std::string> errors(rows.size());
  auto sample_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      try {
        out[r] = rows[r]->sampler.sample(lp + r * vocab, vocab);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    }
  };
  if (spin_ && b >= 4)
    spin_->parallel_for(b, sample_rows);
  else if (spin_)
    sample_rows(0, b);
  else
    at::parallel_for(0, b, /*grain_size=*/4, sample_rows);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.decode_steps;
    if (packed != nullptr) ++stats_.packed_decode_steps;
    stats_.decode_rows += b;
    stats_.max_decode_batch = std::max(stats_.max_decode_batch, b);
    stats_.kv_blocks_peak = std::max<int64_t>(stats_.kv_blocks_peak, pool_.n_in_use());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!errors[r].empty())
      fail(*rows[r], "rollout engine: sampling failed: " + errors[r]);
    else
      accept_token(*rows[r], out[r].id, out[r].logprob);
  }
}

void Engine::accept_token(Sequence& s, TokenId id, float logprob) {
  s.tokens.push_back(id);
  s.result.token_ids.push_back(id);
  s.result.logprobs.push_back(logprob);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.generated_tokens;
  }
  const SamplingParams& sp = s.req.sampling;
  std::optional<FinishReason> why;
  bool keep_going = true;
  if (s.req.on_token) {
    try {
      keep_going = s.req.on_token(id, logprob);
    } catch (const std::exception& e) {
      fail(s, std::string("rollout engine: the request's on_token callback failed: ") + e.what());
      return;
    }
  }
  if (std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), id) != sp.stop_token_ids.end()) {
    why = FinishReason::kStopToken;
  } else if (!sp.stop_strings.empty()) {
    // A stop string completed by this token lies within the text of the last
    // (longest stop string bytes + 1) tokens when every token decodes to >= 1 byte
    // (see EngineOptions::detokenize); decoding only that tail keeps this O(1) per token.
    size_t longest = 0;
    for (const std::string& stop : sp.stop_strings) longest = std::max(longest, stop.size());
    const TokenIds& gen = s.result.token_ids;
    const size_t k = std::min(gen.size(), longest + 1);
    std::string text;
    try {
      text = options_.detokenize(TokenIds(gen.end() - static_cast<std::ptrdiff_t>(k), gen.end()));
    } catch (const std::exception& e) {
      fail(s, std::string("rollout engine: detokenize failed: ") + e.what());
      return;
    }
    for (const std::string& stop : sp.stop_strings)
      if (text.find(stop) != std::string::npos) why = FinishReason::kStopString;
  }
  if (!why && static_cast<int>(s.result.token_ids.size()) >= sp.max_new_tokens)
    why = FinishReason::kLength;
  if (!why && static_cast<int>(s.tokens.size()) >= options_.max_context)
    why = FinishReason::kContextFull;
  if (!why && !keep_going) why = FinishReason::kAborted;
  if (why) {
    s.result.finish = *why;
    finish(s);
  }
}

void Engine::finish(Sequence& s) {
  s.done = true;
  if (s.started) pool_.release(s.kv);
  s.started = false;
  {
    std::lock_guard<std::mutex> lk(mu_);  // counted before the caller can see the result
    ++stats_.requests_finished;
  }
  s.promise.set_value(std::move(s.result));
}

void Engine::fail(Sequence& s, const std::string& why) {
  s.done = true;
  if (s.started) pool_.release(s.kv);  // blocks hold only what was written: still valid cache
  s.started = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.requests_failed;
  }
  s.promise.set_exception(std::make_exception_ptr(Error(why)));
}

void Engine::remove_done() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const SeqPtr& s) { return s->done; }),
                 running_.end());
}

}  // namespace agentr1::rollout
