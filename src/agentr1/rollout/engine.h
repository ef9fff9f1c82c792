// agentr1/rollout/engine.h — the in-process generation engine (implements Generator):
// continuous batching over a paged KV cache with a radix-tree prefix cache, chunked
// prefill, per-request sampling.
//
//   rollout::EngineOptions opt;
//   opt.max_batch = 64;                      // sequences decoded together
//   opt.max_context = 4096;                  // prompt + response per sequence
//   opt.detokenize = [&](const TokenIds& ids) { return tok.decode(ids); };  // stop strings
//   rollout::Engine engine(model, opt);      // starts the worker thread
//   std::future<GenResult> f = engine.submit(req);        // thread-safe; throws on bad input
//   GenResult r = f.get();
//   engine.with_model([&](model::Transformer& m) { load_weights(m); });  // between rollouts
//   engine.clear_prefix_cache();             // weights changed: cached keys/values are stale
//   engine.set_policy_version(step);         // stamped on results generated from now on
//
// How it runs: one worker thread owns the model while generating. Each iteration it
//   1. computes up to `prefill_chunk` prompt tokens: first the unfinished prefills, then
//      newly admitted requests (FIFO) while fewer than `max_batch` sequences run. On
//      admission a request reserves KV blocks for its worst case (prompt +
//      max_new_tokens, capped at max_context) and, with the prefix cache on, starts
//      from the longest prefix any running or finished sequence holds (BlockPool: full
//      blocks shared by reference, a partial one copied), computing only the rest. A
//      request that would share more with a prompt being prefilled in this same
//      iteration waits one iteration to reuse it (the n samples of a GRPO group compute
//      their prompt once); one that cannot reserve its blocks waits for sequences to
//      finish;
//   2. runs one batched decode step (one token per sequence) for every sequence whose
//      prompt is complete, samples each row with the request's own Sampler and checks
//      its stop conditions; finished sequences leave the batch and release their blocks
//      (kept as prefix cache when enabled, evicted least recently used when needed) and
//      fulfil their future.
// Each request samples from its own RNG. With batch_invariant, a request's outputs do
// not depend on batch composition, cache state, prefill chunking or thread count at all
// (bit for bit, on one machine); without it they do only through floating-point
// reduction order (BLAS picks gemv or gemm by the number of rows).
//
// Stop conditions, checked after each sampled token, first match wins:
//   a stop token id (kept in the output)                   -> kStopToken
//   a stop string in the decoded generated text; the output
//     ends with the token that completed it                 -> kStopString
//   max_new_tokens generated                                -> kLength
//   prompt + generated == max_context                       -> kContextFull
//   the request's on_token returned false (client gone)     -> kAborted
// on_token (GenRequest) is called on the worker thread with each token before these
// checks, so a streamed consumer sees tokens as they are sampled.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <atomic>

#include <c10/core/ScalarType.h>

#include "agentr1/core/generator.h"
#include "agentr1/model/kv_cache.h"
#include "agentr1/model/transformer.h"
#include "agentr1/rollout/block_pool.h"

namespace agentr1::model {
class DecodeLayout;  // model/decode_layout.h
}  // namespace agentr1::model

namespace agentr1::rollout {

struct EngineOptions {
  int max_batch = 64;        // max sequences in flight (decoded together in one step), >= 1
  int max_context = 2048;    // max prompt + generated tokens per sequence,
                             // <= the model's max_position_embeddings
  int block_size = 16;       // KV-cache positions per block, >= 1
  int n_blocks = 0;          // KV-cache blocks, >= one max_context sequence's; 0 = enough for
                             // max_batch full-context sequences, doubled when prefix_cache is
                             // on (the rest keeps finished sequences' prefixes)
  bool prefix_cache = true;  // reuse the keys/values of shared token prefixes (running and
                             // finished sequences); exact: outputs equal prefix_cache=false
  int prefill_chunk = 512;   // max prompt tokens computed per iteration (chunked prefill:
                             // bounds how long running sequences wait for a long prompt), >= 1
  std::optional<at::ScalarType> kv_dtype;  // KV-cache dtype; unset = the model's weights' dtype
  bool batch_invariant = true;   // every request computed as if alone: its tokens and log-probs
                                 // are the same bit for bit whatever it is batched with, whether
                                 // its prefix was cached, how its prompt was chunked and how many
                                 // threads run (model::KVCache::batch_invariant). CPU only: on other
                                 // devices it is turned off with a warning. Cost measured by
                                 // bench/batch_invariant_bench (bench/README.md); false = BLAS
                                 // products, whose rounding depends on the batch
  int nice = 0;              // > 0: the worker (and its helpers) run at this lower
                             // scheduling priority (1..19), so a learner computing beside
                             // an asynchronous engine keeps the cores it wants
  bool huge_pages = true;    // CPU models: the constructor moves the weights into
                             // transparent huge pages (model::place_in_huge_pages; a 0.6B
                             // bf16 model's decode products 1.4x faster on a VM): the same
                             // tensors and bits, copied storage by storage; nothing moved
                             // below 2 MiB, if shared outside the module, or where THP is
                             // "never". Nothing else may compute on the model meanwhile
  bool packed_decode = false; // CPU, batch_invariant: steps that decode one sequence alone
                             // read a copy of the weights in the decode layout
                             // (model::DecodeLayout: each product one sequential stream;
                             // the same bits), built at the first such step and repacked
                             // at the first after each pause (with_model,
                             // with_model_drained) or set_policy_version; skipped with a
                             // warning when it would leave under 1 GiB of MemAvailable.
                             // Off by default: the first build touches a fresh arena of
                             // the weights' size, 0.3 s for a 0.6B bf16 model when the
                             // kernel has huge pages at hand and ~7 s on this VM when it
                             // must compact memory for them, more than a short generation
                             // saves; on in `serve` (built at its first such step)
                             // Costs a second copy of the weights in memory (once built)
                             // and one pass over them per repack; false = never built
  int threads = 0;           // compute threads of the worker; 0 = its creator's
                             // at::get_num_threads() (an asynchronous rollout engine may get
                             // fewer, leaving cores to the learner)
  // ids -> text, for stop strings. Called from the worker thread on the last
  // (longest stop string in bytes + 1) generated ids of a request after each token, so
  // it must decode token by token to at least one byte each (a byte-level BPE decode
  // without skipping special tokens does). Unset: requests with stop_strings are
  // rejected by submit().
  std::function<std::string(const TokenIds&)> detokenize;

  // Throws Error naming the first invalid field.
  void validate() const;
};

struct EngineStats {
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;        // fulfilled futures (results, not errors)
  int64_t requests_failed = 0;          // futures failed with an error (model error, shutdown)
  int64_t prompt_tokens = 0;            // prompt tokens of admitted requests
  int64_t prefill_tokens_computed = 0;  // prompt tokens run through the model
  int64_t prefill_tokens_reused = 0;    // prompt tokens whose keys/values came from the cache
  int64_t generated_tokens = 0;         // sampled tokens (all requests)
  int64_t prefill_calls = 0;            // forward calls for prompts
  int64_t decode_steps = 0;             // batched one-token forward calls
  int64_t decode_rows = 0;              // sum of decode batch sizes
  int64_t max_decode_batch = 0;         // largest decode batch seen
  int64_t kv_blocks = 0;                // blocks in the cache
  int64_t kv_blocks_peak = 0;           // most blocks referenced by running sequences at once
  int64_t kv_block_bytes = 0;           // bytes per block (keys and values, all layers)
  int64_t decode_layout_packs = 0;      // weights copied into the decode layout (builds + repacks)
  int64_t decode_layout_bytes = 0;      // its size (0 until built)
  int64_t packed_decode_steps = 0;      // decode steps given it (one sequence alone)
  double mean_decode_batch() const {    // batch occupancy
    return decode_steps ? static_cast<double>(decode_rows) / decode_steps : 0.0;
  }
  double prefix_reuse_rate() const {    // fraction of prompt tokens not recomputed
    return prompt_tokens ? static_cast<double>(prefill_tokens_reused) / prompt_tokens : 0.0;
  }
};

class Engine : public Generator {
 public:
  // Takes the model (a shared module handle: the caller may keep a copy, but must only
  // touch its weights inside with_model or while paused). Allocates the KV cache on the
  // model's device and starts the worker. Throws Error on invalid options.
  Engine(model::Transformer model, EngineOptions options = {});
  // Stops the worker; requests not finished yet fail with Error.
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Validates (empty prompt, prompt length >= max_context, token ids
  // outside [0, vocab), sampling parameters, stop strings without detokenize) and
  // throws Error naming the value; otherwise queues the request. The future holds the
  // result, or an Error if the model failed or the engine shut down first.
  std::future<GenResult> submit(GenRequest request) override;
  int max_context() const override { return options_.max_context; }

  // Blocks until the worker is between iterations and keeps it there until resume();
  // submit() keeps queueing meanwhile. Nests (resume once per pause).
  void pause();
  void resume();
  // pause(); fn(model); resume() -- even if fn throws. For weight updates; call
  // clear_prefix_cache() afterwards if the weights changed.
  void with_model(const std::function<void(model::Transformer&)>& fn);
  // The same for fn that only reads the model (a scoring pass; it must not change the
  // weights): the engine's copy of them (packed_decode) is kept, not repacked.
  void with_model_read(const std::function<void(model::Transformer&)>& fn);

  // Weight updates that no response straddles: stops admitting new requests (submit()
  // keeps queueing), waits until every admitted request has finished, then runs
  // fn(model) with the worker paused, and admits again. So every response is sampled
  // by one set of weights, whose version set_policy_version (called inside fn) stamps.
  // Requests still queued meanwhile are admitted after fn, with the new weights.
  void with_model_drained(const std::function<void(model::Transformer&)>& fn);

  // Stamped on results of requests admitted from now on (GenResult::policy_version).
  void set_policy_version(int64_t version);
  // Compute threads from the next forward pass on (>= 1; the worker's SpinPool is rebuilt
  // between passes, so no pass changes team halfway). The batch-invariant products give
  // the same bits on any count; BLAS products (batch_invariant false) may not. The trainer
  // calls it each step with the cores other processes leave (core/cpu_load.h).
  void set_threads(int threads);
  int threads() const { return threads_.load(); }
  // The threads the last forward pass ran on (set_threads takes effect at the next one).
  int active_threads() const { return active_threads_.load(); }
  int64_t policy_version() const;
  // Forgets all cached keys/values (finished sequences' blocks; running sequences stop
  // donating prefixes). Takes effect before the next admission.
  void clear_prefix_cache();

  EngineStats stats() const;
  void reset_stats();
  const EngineOptions& options() const { return options_; }
  int64_t vocab_size() const { return vocab_; }

 private:
  struct Sequence;
  using SeqPtr = std::unique_ptr<Sequence>;

  void worker_loop();
  void iterate();                                  // one scheduler iteration
  bool admit(Sequence& s, const std::vector<Sequence*>& planned);
  void run_prefill(const std::vector<std::pair<Sequence*, int>>& plan);
  void run_decode();
  void accept_token(Sequence& s, TokenId id, float logprob);  // append + stop checks
  void finish(Sequence& s);                        // fulfil + release the blocks
  void fail(Sequence& s, const std::string& why);  // fail the future + release the blocks
  void remove_done();                              // drop finished sequences from the lists

  model::Transformer model_;
  EngineOptions options_;
  // The worker's extra cores (its creator's at::get_num_threads() in all). Not
  // OpenMP: with two OpenMP teams alive (the learner's and the worker's) on a machine
  // with as many cores as one team, libgomp stops spinning and every parallel region,
  // the learner's included, pays futex wake-ups, which cost more than a decode step's
  // small products (measured at batch 1: 3.3 -> 0.9 ms per token). Null on one thread
  // or off the CPU.
  std::unique_ptr<model::SpinPool> spin_;
  std::atomic<int> threads_{1};   // wanted by set_threads
  std::atomic<int> active_threads_{1};  // what spin_ has (written by the worker only)
  void adopt_threads();           // worker: rebuild spin_ when threads_ changed
  // Worker: the decode layout for a one-row step, built or repacked first when needed;
  // null when packed_decode is off (or was turned off by a failure to build it).
  const model::DecodeLayout* decode_layout();
  std::unique_ptr<model::DecodeLayout> packed_;  // worker-owned
  void pause_marking(bool weights_may_change);
  void run_paused(bool weights_may_change, const std::function<void(model::Transformer&)>& fn);
  std::atomic<bool> packed_stale_{false};         // weights may have changed since packed_
  bool packed_on_ = false;                        // options and device allow it
  int64_t vocab_ = 0;
  at::Device device_;
  model::KVCache cache_;
  BlockPool pool_;  // worker-owned

  // Worker-owned scheduling state.
  bool hold_ = false;            // hold_count_ > 0 at this iteration's start: admit nothing
  std::deque<SeqPtr> waiting_;
  std::vector<SeqPtr> running_;  // admitted: prefilling or decoding, admission order

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_work_;
  std::condition_variable cv_idle_;
  std::deque<SeqPtr> incoming_;
  bool stop_ = false;
  int pause_count_ = 0;
  int hold_count_ = 0;         // > 0: admit nothing (with_model_drained)
  size_t running_count_ = 0;   // running_.size() as of the worker's last loop top
  bool busy_ = false;
  bool clear_requested_ = false;
  int64_t policy_version_ = 0;
  EngineStats stats_;

  std::thread worker_;
};

}  // namespace agentr1::rollout
