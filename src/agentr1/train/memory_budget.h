// agentr1/train/memory_budget.h — what a training run will hold in memory, estimated from
// the model's config.json and the TrainConfig before anything is loaded, checked against a
// budget (trainer.memory_gb, or what the machine has), and the KV cache sized from what is
// left, as vLLM sizes its cache from gpu_memory_utilization.
//
//   const MemoryPlan plan = plan_run_memory(cfg);  // config.json + /proc/meminfo, then arithmetic
//   log_memory_plan(plan);              // the table (INFO), a warning if the cache shrank
//   check_memory_plan(plan);            // throws Error: budget, biggest items, keys to turn
//   eo.n_blocks = plan.kv_blocks;       // each engine's KV blocks
//
// Pure arithmetic (no torch): every number is bytes, from shapes and dtypes. What is
// counted, per model (see plan_memory): weights, gradients and AdamW state of what trains,
// the frozen reference copy, the critic, the asynchronous engine's copy of the weights, each
// engine's KV cache, the activations of the learner's largest micro-batch (worst case: rows
// as long as the rollout limits allow, no shared prefix) and a fixed runtime overhead.
// The formula's constants were measured with peak RSS (see memory_budget.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agentr1/model/config.h"

namespace agentr1::train {

struct TrainConfig;

inline constexpr int64_t kGiB = int64_t{1} << 30;

// The bytes a run may use and where the number came from.
struct MemoryBudget {
  int64_t bytes = 0;
  std::string source;  // "trainer.memory_gb=12" | "auto: MemTotal 23.5 GiB, less a 2.4 GiB margin"
};

// Bytes of MemTotal in /proc/meminfo text. Throws Error when the line is missing or bad.
int64_t parse_meminfo_total(const std::string& meminfo);
// A cgroup memory limit file's text (v2 memory.max: "max" or bytes; v1
// memory.limit_in_bytes: bytes, ~2^63 meaning none). nullopt = no limit.
std::optional<int64_t> parse_cgroup_limit(const std::string& text);
// The margin kept free of an automatic budget: 10% of the machine or 1.5 GiB, whichever is
// larger (the kernel, page cache of the model files, the shell, a neighbour's editor).
int64_t auto_memory_margin(int64_t machine_bytes);
// memory_gb > 0: that many GiB. 0: min(MemTotal, the cgroup's limit) less
// auto_memory_margin. Reads /proc/meminfo, /proc/self/cgroup and the cgroup files.
MemoryBudget resolve_memory_budget(double memory_gb);

// One line of the estimate.
struct MemoryItem {
  std::string owner;  // policy | reference | critic | rollout copy | learner | rollout | runtime
  std::string what;   // weights | gradients | AdamW state | KV cache | activations | ...
  int64_t bytes = 0;
  std::string keys;   // the config keys that shrink it ("" = none)
};

struct MemoryPlan {
  MemoryBudget budget;
  std::vector<MemoryItem> items;  // everything, the KV caches included
  int engines = 0;                // in-process engines, each with its own KV cache (0 = remote)
  int64_t kv_block_bytes = 0;     // one block: keys and values of block_size positions, all layers
  int kv_blocks = 0;              // each engine's blocks (what EngineOptions::n_blocks gets)
  int kv_blocks_default = 0;      // what rollout.kv_blocks=0 gave before budgets: max_batch
                                  // full-context sequences, twice that with prefix_cache
  int kv_blocks_min = 0;          // one max_context sequence: less cannot run
  int64_t row_tokens = 0;         // the learner's longest row (worst case) the activations assume
  int64_t micro_batch_tokens = 0; // tokens of the largest micro-batch the activations assume
  bool fits = false;              // total() <= budget.bytes with kv_blocks >= kv_blocks_min
  std::string hint;               // !fits because of the actor's micro-batch: the
                                  // actor.micro_batch_max_tokens that would fit, or that not
                                  // even one row does
  int64_t total() const;          // sum of items
};

// The estimate for `cfg` whose policy has shape `policy` (its config.json) and whose critic,
// when algorithm.uses_critic(), has shape `critic` (the policy's when critic.model_path is
// empty). rollout.kv_blocks > 0 is taken as given; 0 gives each engine
// min(kv_blocks_default, what fits in the budget after everything else). Never throws for
// a configuration that does not fit: fits is false and check_memory_plan says why.
// teachers: the distillation teachers' shapes by name (algorithm.distill), frozen weights
// in model.dtype each.
MemoryPlan plan_memory(const TrainConfig& cfg, const model::ModelConfig& policy,
                       const std::optional<model::ModelConfig>& critic, const MemoryBudget& budget,
                       const std::map<std::string, model::ModelConfig>& teachers = {});

// plan_memory for cfg as RLTrainer runs it: the policy's shape from model.path/config.json,
// the critic's from critic.model_path/config.json (when it has one), each distillation
// teacher's from its directory (not the policy's LoRA base), the budget from
// resolve_memory_budget(trainer.memory_gb). Reads those files only, not the weights.
// Throws Error naming a config.json that cannot be read.
MemoryPlan plan_run_memory(const TrainConfig& cfg);

// Logs the table (INFO) and, when rollout.kv_blocks=0 gave fewer blocks than before
// budgets, a warning saying how many full-context sequences the cache holds.
void log_memory_plan(const MemoryPlan& plan);

// A small table: one line per item, the total and the budget (for the log).
std::string format_memory_plan(const MemoryPlan& plan);
// Throws Error when !plan.fits, naming the budget, the biggest items with their sizes and
// the keys that shrink them.
void check_memory_plan(const MemoryPlan& plan);

// "1.25 GiB" / "340 MiB".
std::string format_bytes(int64_t bytes);

// Tokens per chunk of the learner's LM head (chunked_logprobs.h) for a vocabulary of
// `vocab`: about 64 MiB of fp32 logits per chunk, at least 16 tokens. Micro-batches of
// at most this many tokens keep the dense path.
int64_t logits_chunk_tokens(int64_t vocab);

}  // namespace agentr1::train
