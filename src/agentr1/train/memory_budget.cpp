#include "agentr1/train/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include "agentr1/core/error.h"
#include "agentr1/core/log.h"
#include "agentr1/core/strings.h"
#include "agentr1/train/train_config.h"

namespace agentr1::train {

namespace {

// What a process of this program holds beyond the items counted below: libtorch and its
// allocator's slack, the tokenizer, the datasets, thread stacks and pools, the prefix tree,
// the packed rows. Fitted on the built-in default (`agentr1 train trainer.total_steps=2`):
// peak RSS 735 MiB, of which the counted weights, optimiser and KV cache are 304 MiB and
// the activations of its ~110-token rows ~125 MiB.
constexpr int64_t kRuntimeBytes = 320LL << 20;

// Activations: what autograd keeps per token per layer, in elements of the weights' dtype,
// read off model/transformer.cpp's training forward: the residual input, the two RMSNorms'
// products and outputs (6 H), q through its projection, norm, RoPE (3 tensors) and the
// attention output before and after the reshape (8 q), k the same way and v (6 kv), the
// MLP's gate, SiLU, up and product (4 I). The fitted factor below scales the whole.
// Measured over counted: fitted on a Qwen3-0.6B-shaped model in fp32 (2 rows of ~316
// tokens per micro-batch, no shared prefix). With the dense LM head: peak RSS 16.84 GiB in
// step 2's backward, of which weights, gradients, AdamW state and the KV cache are 10.14
// GiB, leaving ~6.7 GiB where the count gave 5.2 GiB plus the runtime (factor 1.15). With
// the chunked head (2026-12-04) the peak fell only to 16.40 GiB while the count of the
// logits fell by ~2 GiB: the dense count of six [tokens, vocab] tensors was high and the
// rest low; 1.35 puts the worst case back above the measured peak. The allocator's slack
// and the temporaries of the op that peaks are what the count misses.
constexpr int64_t kActivationScalePercent = 135;

int64_t layer_elements_per_token(const model::ModelConfig& m) {
  const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  return 6 * m.hidden_size + 8 * q + 6 * kv + 4 * m.intermediate_size;
}

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "bfloat16" || dtype == "fp16" || dtype == "float16") return 2;
  return 4;
}

// Activations of one forward + backward over `tokens` tokens in rows of `row` tokens
// through a body of shape m (every layer's saved tensors, the attention scores
// [rows, heads, T, T] fp32 that softmax keeps, plus one layer's score gradients while
// backward runs), and when vocab > 0 the fp32 logits [tokens, vocab] with their
// log-softmax, exp, entropy product and the gradients of those (6 such tensors).
// checkpoint (actor.gradient_checkpointing): every layer keeps only its input [tokens, H]
// and one layer at a time is recomputed, so one layer's saved tensors and scores stand in
// for all L. Logits beyond one chunk (logits_chunk_tokens) go through the head chunk by
// chunk (chunked_logprobs.h): a few [chunk, vocab] fp32 blocks at a time. Rows longer
// than `block` > 0 attend in tiles (model/blocked_attention.h): each layer keeps one
// fp32 log-sum-exp per query and head instead of the scores, and a few [rows, heads,
// block, block] fp32 tiles live while one layer runs.
int64_t activation_bytes(const model::ModelConfig& m, int64_t e, int64_t tokens, int64_t row, bool logits,
                         bool checkpoint = false, bool head_trained = false, int64_t block = 0) {
  if (checkpoint) {
    model::ModelConfig one = m;
    one.num_hidden_layers = 1;
    return activation_bytes(one, e, tokens, row, logits, false, head_trained, block) +
           (m.num_hidden_layers - 1) * tokens * m.hidden_size * e / 100 * kActivationScalePercent;
  }
  const int64_t L = m.num_hidden_layers;
  int64_t per_token_layer = e * layer_elements_per_token(m);
  // Reduced precision: each RMSNorm keeps an fp32 copy of its input and an fp32 product.
  if (e < 4) {
    const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
    per_token_layer += 8 * (2 * m.hidden_size + q + kv);
  }
  // softmax keeps its fp32 output; in bf16 the matmul keeps a bf16 copy too.
  const int64_t score_bytes = 4 + (e < 4 ? e : 0);
  const bool tiled = block > 0 && row > block;
  const int64_t rows = std::max<int64_t>(1, (tokens + row - 1) / row);
  const int64_t scores_layer =
      tiled ? m.num_attention_heads * tokens * 4 : m.num_attention_heads * tokens * row * score_bytes;
  const int64_t scores_transient =
      tiled ? 4 * m.num_attention_heads * rows * block * block * 4 : 2 * m.num_attention_heads * tokens * row * 4;
  int64_t bytes = L * (tokens * per_token_layer + scores_layer) + scores_transient;
  const int64_t chunk = logits_chunk_tokens(m.vocab_size);
  if (logits && tokens <= chunk) bytes += 6 * tokens * m.vocab_size * 4 + (e < 4 ? tokens * m.vocab_size * e : 0);
  // Chunked: a few [chunk, vocab] fp32 blocks, and in the backward the head's fp32
  // gradient [vocab, H] when it trains (full fine-tuning; a LoRA head is frozen).
  if (logits && tokens > chunk)
    bytes += 4 * chunk * m.vocab_size * 4 + 2 * tokens * m.hidden_size * 4 +
             (head_trained ? m.vocab_size * m.hidden_size * 4 : 0);
  return bytes / 100 * kActivationScalePercent;
}

// Parameters the optimiser never sees a gradient for in a value model: the LM head of an
// untied body (the value head reads the hidden states).
int64_t untrained_lm_head(const model::ModelConfig& m) {
  return m.tie_word_embeddings ? 0 : m.vocab_size * m.hidden_size;
}

std::string gib(int64_t b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << static_cast<double>(b) / kGiB << " GiB";
  return os.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The memory cgroup's directory of this process: v2 ("0::/path") or v1 ("N:memory:/path").
// Empty when none is named.
std::pair<std::string, std::string> cgroup_paths(const std::string& self_cgroup) {
  std::string v1, v2;
  std::istringstream in(self_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) v2 = path;
    std::istringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');)
      if (c == "memory") v1 = path;
  }
  return {v1, v2};
}

// The lowest limit among the files that exist (a container sees its own cgroup at the root).
std::optional<int64_t> cgroup_limit() {
  const auto [v1, v2] = cgroup_paths(read_file("/proc/self/cgroup"));
  std::optional<int64_t> best;
  for (const std::string& f :
       {"/sys/fs/cgroup" + v2 + "/memory.max", std::string("/sys/fs/cgroup/memory.max"),
        "/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes",
        std::string("/sys/fs/cgroup/memory/memory.limit_in_bytes")}) {
    const std::string text = read_file(f);
    if (text.empty()) continue;
    if (const auto lim = parse_cgroup_limit(text); lim && (!best || *lim < *best)) best = lim;
  }
  return best;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  if (bytes >= kGiB) return gib(bytes);
  std::ostringstream os;
  os << std::fixed << std::setprecision(0) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

int64_t parse_meminfo_total(const std::string& meminfo) {
  std::istringstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream ls(line.substr(9));
    int64_t kb = -1;
    std::string unit;
    ls >> kb >> unit;
    AGENTR1_CHECK(ls && kb > 0 && unit == "kB",
                  "/proc/meminfo: expected 'MemTotal: <n> kB', got '" << line << "'");
    return kb * 1024;
  }
  throw Error("/proc/meminfo has no MemTotal line; HINT: set trainer.memory_gb to the GiB this run may use");
}

std::optional<int64_t> parse_cgroup_limit(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty() || t == "max") return std::nullopt;
  int64_t v = 0;
  try {
    size_t used = 0;
    const long long x = std::stoll(t, &used);
    if (used != t.size() || x <= 0) return std::nullopt;
    v = x;
  } catch (const std::exception&) {
    return std::nullopt;  // "9223372036854775807"-like overflow or junk: no usable limit
  }
  // v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712).
  if (v >= (int64_t{1} << 60)) return std::nullopt;
  return v;
}

int64_t auto_memory_margin(int64_t machine_bytes) {
  return std::max(machine_bytes / 10, 3 * kGiB / 2);
}

MemoryBudget resolve_memory_budget(double memory_gb) {
  AGENTR1_CHECK(memory_gb >= 0, "trainer.memory_gb must be >= 0 (0 = what the machine has), got " << memory_gb);
  MemoryBudget b;
  if (memory_gb > 0) {
    b.bytes = static_cast<int64_t>(memory_gb * static_cast<double>(kGiB));
    std::ostringstream os;
    os << "trainer.memory_gb=" << memory_gb;
    b.source = os.str();
    return b;
  }
  int64_t machine = parse_meminfo_total(read_file("/proc/meminfo"));
  std::string what = "MemTotal " + gib(machine);
  if (const auto lim = cgroup_limit(); lim && *lim < machine) {
    machine = *lim;
    what = "the cgroup's limit " + gib(machine);
  }
  const int64_t margin = auto_memory_margin(machine);
  b.bytes = std::max<int64_t>(0, machine - margin);
  b.source = "auto: " + what + " less a " + gib(margin) + " margin (trainer.memory_gb=0)";
  return b;
}

int64_t MemoryPlan::total() const {
  int64_t t = 0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

// Calibration (2 cores, libtorch 1.13 CPU, peak RSS from /usr/bin/time -v; numbers in
// memory_budget_test.cpp's Calibration tests): see the comments there.
MemoryPlan plan_memory(const TrainConfig& cfg, const model::ModelConfig& policy,
                       const std::optional<model::ModelConfig>& critic, const MemoryBudget& budget,
                       const std::map<std::string, model::ModelConfig>& teachers) {
  MemoryPlan p;
  p.budget = budget;
  const int64_t e = dtype_bytes(cfg.model.dtype);
  const model::LoraOptions& lora = cfg.actor.lora;
  const int64_t n_params = policy.num_parameters();
  const int64_t weights = n_params * e;
  auto add = [&](std::string owner, std::string what, int64_t bytes, std::string keys) {
    if (bytes > 0) p.items.push_back({std::move(owner), std::move(what), bytes, std::move(keys)});
  };
  // The policy. LoRA: the base frozen in model.dtype, the adapters fp32 and the only
  // parameters with gradients and AdamW state; the reference is the base with adapters off.
  if (lora.enabled()) {
    const int64_t adapters = model::lora_parameter_count(policy, lora) * 4;
    // modules_to_save train whole in the weights' dtype, beside a frozen copy of each.
    const int64_t saved = model::saved_module_parameter_count(policy, lora) * e;
    add("policy", "weights (frozen base)", weights, "model.dtype=bf16");
    add("policy", "LoRA adapters", adapters, "actor.lora.rank");
    add("policy", "modules_to_save (frozen originals)", saved, "actor.lora.modules_to_save=[]");
    add("policy", "gradients", adapters + saved, "actor.lora.rank, actor.lora.modules_to_save");
    add("policy", "AdamW state", 2 * (adapters + saved), "actor.lora.rank, actor.lora.modules_to_save");
  } else {
    add("policy", "weights", weights, "model.dtype=bf16");
    // torch's AdamW keeps exp_avg and exp_avg_sq in the parameter's dtype.
    add("policy", "gradients", weights, "model.dtype=bf16, actor.lora.rank");
    add("policy", "AdamW state", 2 * weights, "model.dtype=bf16, actor.lora.rank");
    if (cfg.actor.use_kl_loss || cfg.algorithm.use_kl_in_reward)
      add("reference", "weights", weights,
          "actor.use_kl_loss=false and algorithm.use_kl_in_reward=false, or actor.lora.rank (no copy)");
  }
  // The critic: another body plus a value head, with its own AdamW.
  int64_t critic_act = 0;
  if (cfg.algorithm.uses_critic()) {
    const model::ModelConfig& c = critic ? *critic : policy;
    const model::LoraOptions& cl_lora = cfg.critic.lora;
    if (cl_lora.enabled()) {
      // The body frozen (the policy's own tensors when both have adapters and the critic
      // starts from the policy), its fp32 adapters and the fp32 head trained.
      const bool shared = lora.enabled() && !critic;
      const int64_t trained = (model::lora_parameter_count(c, cl_lora) + c.hidden_size + 1) * 4;
      if (!shared) add("critic", "weights (frozen base)", c.num_parameters() * e, "critic.model_path (a smaller model)");
      add("critic", "LoRA adapters + value head", trained, "critic.lora.rank");
      add("critic", "gradients", trained, "critic.lora.rank");
      add("critic", "AdamW state", 2 * trained, "critic.lora.rank");
    } else {
      const int64_t cw = (c.num_parameters() + c.hidden_size + 1) * e;
      const int64_t ct = (c.num_parameters() - untrained_lm_head(c) + c.hidden_size + 1) * e;
      add("critic", "weights", cw, "critic.model_path (a smaller model), critic.lora.rank");
      add("critic", "gradients", ct, "critic.model_path, critic.lora.rank");
      add("critic", "AdamW state", 2 * ct, "critic.model_path, critic.lora.rank");
    }
    const int64_t row = cfg.rollout.flow.max_prompt_tokens +
                        std::min(cfg.rollout.flow.max_new_tokens, cfg.rollout.flow.max_response_tokens);
    const LoopOptions& cl = cfg.critic.loop;
    int64_t tokens = row * cl.micro_batch_size;
    if (cl.micro_batch_max_tokens > 0) tokens = std::max(row, std::min(tokens, cl.micro_batch_max_tokens));
    critic_act = activation_bytes(c, e, tokens, row, /*logits=*/false, false, false, model::kDefaultAttentionBlock);
  }
  // Distillation teachers: frozen weights in model.dtype (a "base" teacher is the policy's
  // own and is not listed); scoring them needs no more than the policy's scoring pass.
  for (const auto& [name, tc] : teachers)
    add("teacher '" + name + "'", "weights", tc.num_parameters() * e,
        "a smaller teacher, model.dtype=bf16, or the teacher 'base' with actor.lora.rank");
  // Rollout: the asynchronous source generates from its own copy of the weights (and a
  // staged snapshot of them on the way in) beside the validation engine over the policy.
  const bool local = !cfg.rollout.remote_engine();
  const bool async = local && cfg.rollout.asynchronous();
  // rollout.dtype other than the model's: a converted copy (synchronous too), staged
  // through an fp32 snapshot of the policy's weights.
  const bool converted = local && !cfg.rollout.dtype.empty() && cfg.rollout.dtype != cfg.model.dtype;
  const int64_t copy_weights =
      converted ? weights / e * dtype_bytes(cfg.rollout.dtype) : weights;
  p.engines = local ? (async || converted ? 2 : 1) : 0;
  if (async || converted) {
    const char* fix = async ? "rollout.max_staleness=0 (synchronous)" : "rollout.dtype= (the model's)";
    add("rollout copy", "weights", copy_weights, fix);
    add("rollout copy", "staged weights", weights, fix);
  }
  // The learner's largest micro-batch. Its rows are at most one turn's prompt plus that
  // turn's response (merged turns extend a prompt that is itself capped).
  const auto& flow = cfg.rollout.flow;
  p.row_tokens = flow.max_prompt_tokens + std::min(flow.max_new_tokens, flow.max_response_tokens);
  const LoopOptions& al = cfg.actor.loop;
  const int64_t rows_per_step =
      static_cast<int64_t>(cfg.data.train_batch_size) * cfg.rollout.n * std::max(1, flow.max_steps);
  int64_t tokens = p.row_tokens * std::min<int64_t>(al.micro_batch_size, rows_per_step);
  if (al.micro_batch_max_tokens > 0) tokens = std::max(p.row_tokens, std::min(tokens, al.micro_batch_max_tokens));
  p.micro_batch_tokens = tokens;
  const bool ck = cfg.actor.gradient_checkpointing;
  const int64_t block = cfg.actor.attention_block;
  const bool head_trained = !lora.enabled() || !lora.modules_to_save.empty();
  const int64_t actor_act =
      activation_bytes(policy, e, tokens, p.row_tokens, /*logits=*/true, ck, head_trained, block);
  // AdamW's step makes a few temporaries the size of the parameter it updates; the largest
  // is the embedding (when it trains). Not at the same time as the activations.
  const int64_t largest_param =
      lora.enabled() && lora.modules_to_save.empty() ? 0 : policy.vocab_size * policy.hidden_size * e;
  const int64_t act = std::max({actor_act, critic_act, 3 * largest_param});
  add("learner", "activations (" + std::to_string(tokens) + "-token micro-batch, rows of " +
                     std::to_string(p.row_tokens) + ")",
      act,
      "actor.micro_batch_size / actor.micro_batch_max_tokens, rollout.max_prompt_tokens / max_new_tokens");
  add("runtime", "libtorch, tokenizer, data, pools", kRuntimeBytes, "");
  // KV caches: keys and values of every layer, per block, in the weights' dtype.
  const int bs = std::max(1, cfg.rollout.kv_block_size);
  const int max_context = flow.max_prompt_tokens + flow.max_new_tokens;
  p.kv_block_bytes = 2 * policy.num_hidden_layers * bs * policy.num_key_value_heads * policy.head_dim * e;
  p.kv_blocks_min = (max_context + bs - 1) / bs;
  p.kv_blocks_default = p.kv_blocks_min * std::max(1, cfg.rollout.max_batch) * (cfg.rollout.prefix_cache ? 2 : 1);
  const int64_t rest = p.total();
  if (p.engines > 0) {
    if (cfg.rollout.kv_blocks > 0) {
      p.kv_blocks = cfg.rollout.kv_blocks;
    } else {
      const int64_t left = std::max<int64_t>(0, budget.bytes - rest);
      const int64_t fit = left / (p.kv_block_bytes * p.engines);
      p.kv_blocks = static_cast<int>(std::min<int64_t>(p.kv_blocks_default, fit));
    }
    add("rollout", p.engines == 2 ? "KV caches (rollout engine + validation engine)" : "KV cache",
        static_cast<int64_t>(std::max(p.kv_blocks, p.kv_blocks_min)) * p.kv_block_bytes * p.engines,
        "rollout.kv_blocks, rollout.max_batch, rollout.max_prompt_tokens / max_new_tokens");
  }
  p.fits = (p.engines == 0 || p.kv_blocks >= p.kv_blocks_min) && p.total() <= budget.bytes;
  // Refused because of the actor's micro-batch: the largest token cap that would fit beside
  // everything else and the smallest KV cache, so the error can say which value to set.
  if (!p.fits && actor_act > std::max(critic_act, 3 * largest_param)) {
    const int64_t kv_least =
        p.engines == 0 ? 0
                       : static_cast<int64_t>(cfg.rollout.kv_blocks > 0 ? p.kv_blocks : p.kv_blocks_min) *
                             p.kv_block_bytes * p.engines;
    const int64_t others = rest - act + kv_least;
    auto fits_with = [&](int64_t t) {
      const int64_t a = activation_bytes(policy, e, t, p.row_tokens, /*logits=*/true, ck, head_trained, block);
      return others + std::max({a, critic_act, 3 * largest_param}) <= budget.bytes;
    };
    if (!fits_with(p.row_tokens)) {
      p.hint = "not even one row of " + std::to_string(p.row_tokens) +
               " tokens fits beside the rest: shorten rows (rollout.max_prompt_tokens, rollout.max_new_tokens) or "
               "shrink the weights' side (model.dtype=bf16, actor.lora.rank=16)";
    } else {
      int64_t lo = p.row_tokens, hi = tokens;  // fits_with(lo), not fits_with(hi)
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (fits_with(mid) ? lo : hi) = mid;
      }
      p.hint = "actor.micro_batch_max_tokens=" + std::to_string(lo) + " would fit (rows are up to " +
               std::to_string(p.row_tokens) + " tokens)";
    }
  }
  return p;
}

MemoryPlan plan_run_memory(const TrainConfig& cfg) {
  auto shape = [](const std::string& dir, const std::string& key) {
    const std::string f = (dir.empty() ? std::string(".") : dir) + "/config.json";
    return with_context(key + ": reading " + f + " for the memory estimate",
                        [&] { return model::ModelConfig::load(f); });
  };
  const model::ModelConfig policy = shape(cfg.model.path, "model.path");
  std::optional<model::ModelConfig> critic;
  if (cfg.algorithm.uses_critic() && !cfg.critic.model_path.empty())
    critic = shape(cfg.critic.model_path, "critic.model_path");
  std::map<std::string, model::ModelConfig> teachers;
  if (cfg.algorithm.distill.enabled())
    for (const auto& [name, t] : cfg.algorithm.distill.resolved_teachers())
      if (t.path != kBaseTeacher && !t.remote())  // a remote teacher's weights live on its server
        teachers.emplace(name, shape(t.path, "algorithm.distill.teachers." + name + ".path"));
  return plan_memory(cfg, policy, critic, resolve_memory_budget(cfg.trainer.memory_gb), teachers);
}

void log_memory_plan(const MemoryPlan& p) {
  AGENTR1_LOG(INFO) << format_memory_plan(p);
  if (p.fits && p.engines > 0 && p.kv_blocks < p.kv_blocks_default) {
    AGENTR1_LOG(WARN) << "rollout.kv_blocks=0: the KV cache gets what the memory budget leaves, " << p.kv_blocks
                      << " blocks (room for " << p.kv_blocks / std::max(1, p.kv_blocks_min)
                      << " full-context sequences at once), fewer than the " << p.kv_blocks_default
                      << " that max_batch full-context sequences would take; requests wait for blocks when it is "
                         "full. HINT: rollout.max_batch to match, or trainer.memory_gb";
  }
}

std::string format_memory_plan(const MemoryPlan& p) {
  std::ostringstream os;
  os << "memory estimate (worst case, before loading):\n";
  size_t w = 0;
  for (const auto& i : p.items) w = std::max(w, i.owner.size() + i.what.size() + 1);
  for (const auto& i : p.items)
    os << "  " << std::left << std::setw(static_cast<int>(w)) << (i.owner + " " + i.what) << "  " << std::right
       << std::setw(10) << format_bytes(i.bytes) << "\n";
  os << "  " << std::left << std::setw(static_cast<int>(w)) << "total" << "  " << std::right << std::setw(10)
     << format_bytes(p.total()) << "  of a budget of " << format_bytes(p.budget.bytes) << " (" << p.budget.source
     << ")";
  if (p.engines > 0)
    os << "\n  KV cache: " << p.kv_blocks << " blocks per engine (room for " << p.kv_blocks / std::max(1, p.kv_blocks_min)
       << " full-context sequences at once; max_batch of them would take " << p.kv_blocks_default << ")";
  return os.str();
}

void check_memory_plan(const MemoryPlan& p) {
  if (p.fits) return;
  std::vector<MemoryItem> big = p.items;
  std::stable_sort(big.begin(), big.end(), [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  std::ostringstream os;
  os << "this configuration needs about " << format_bytes(p.total()) << " of memory but the budget is "
     << format_bytes(p.budget.bytes) << " (" << p.budget.source << ")";
  if (p.engines > 0 && p.kv_blocks < p.kv_blocks_min)
    os << "; after everything else not even one full-context sequence's KV cache fits (" << p.kv_blocks_min
       << " blocks of " << format_bytes(p.kv_block_bytes) << (p.engines > 1 ? " in each of 2 engines" : "") << ")";
  os << ". The biggest items:";
  for (size_t i = 0; i < big.size() && i < 4; ++i)
    os << "\n  " << big[i].owner << " " << big[i].what << ": " << format_bytes(big[i].bytes)
       << (big[i].keys.empty() ? "" : "  (shrink: " + big[i].keys + ")");
  if (!p.hint.empty()) os << "\nHINT: " << p.hint << ".";
  os << "\nHINT: lower what dominates (rollout.max_batch, rollout.kv_blocks, actor.micro_batch_size or "
        "actor.micro_batch_max_tokens, rollout.max_prompt_tokens / max_new_tokens), train adapters "
        "(actor.lora.rank=16), load the weights in bf16 (model.dtype=bf16), or raise trainer.memory_gb if "
        "the machine really has more";
  throw Error(os.str());
}

int64_t logits_chunk_tokens(int64_t vocab) {
  return std::max<int64_t>(16, (int64_t{1} << 24) / std::max<int64_t>(1, vocab));
}

}  // namespace agentr1::train
