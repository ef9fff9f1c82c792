// agentr1/train/learner/batch.h — trajectories -> padded tensors for the learner.
//
//   std::vector<PackedRow> rows = pack_trajectories(trajs, /*merge=*/true);
//   scatter_step_tokens(rows, token_advantages, &PackedRow::advantage);  // the estimator's
//   for (auto& mb : make_micro_batches(rows, /*max_rows=*/8)) {
//     TrainBatch b = collate(rows, mb);          // tensors [B,T] / [B,T-1]
//     ...
//   }
//
// A row is one token sequence. Without merging, every Step is a row: its prompt ids
// followed by its response ids, exactly as the policy saw and sampled them. With
// merging (append-only contexts), consecutive steps whose prompt extends the previous
// step's prompt + response share ONE row: the shared prefix is computed once and each
// step's response is a loss segment at its own positions. Causal attention makes the
// log-probs identical to the per-step computation (tested).
//
// Target layout: position t of the [B,T-1] tensors scores token t+1 (the logit at t
// predicts token t+1). action_mask[b,t] = 1 when token t+1 is a response token.
//
// Shared prefix: when every row of a micro-batch starts with the same tokens (the
// system prompt and tools block, a GRPO group's question), collate() can move them
// into TrainBatch::prefix_ids so the model computes them once (Transformer::forward's
// prefix_ids) instead of once per row. The [B,T] tensors then hold each row's tokens
// from prefix_len on, and column c of the [B,T-1] tensors scores row token
// prefix_len + c + 1. The prefix stops before the token whose logit predicts the first
// response token, so no scored position is lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/core/trajectory.h"

namespace agentr1::train {

struct PackedRow {
  TokenIds tokens;                      // the sequence
  std::vector<uint8_t> action;          // [len] 1 where tokens[i] is a response token
  std::vector<float> advantage;         // [len] advantage of tokens[i] (0 off actions)
  std::vector<float> rollout_logprob;   // [len] behaviour log-prob of tokens[i] (0 off)
  std::vector<int32_t> step_of;         // [len] index of the Step that sampled tokens[i], -1 off
  std::vector<float> old_logprob;       // [len] log-prob under the policy before the update
                                        // (filled by the learner; empty until then)
  std::vector<float> ref_logprob;       // [len] log-prob under the frozen reference (or empty)
  // Distillation columns (algorithm.distill; empty otherwise), the teacher's judgement of
  // the state before each token, like the log-probs above.
  std::vector<float> teacher_logprob;   // [len] the routed teacher's log-prob of tokens[i]
  std::vector<int32_t> teacher_topk_ids;   // [len * K] (loss topk_fkl) the teacher's K most
                                        // likely ids at the position that produced tokens[i]
  std::vector<float> teacher_topk_logprob; // [len * K] their log-probs under the teacher
  std::vector<float> entropy;           // [len] policy entropy at the position that produced
                                        // tokens[i] (scoring pass; empty unless asked for)
  // Critic columns (empty unless a critic is used). Like the log-probs, the entry of
  // token i belongs to the state before it: the value head read at position i-1.
  std::vector<float> value;             // [len] critic value at rollout time (old values)
  std::vector<float> returns;           // [len] value targets from the estimator (0 off)
  std::vector<float> value_mask;        // [len] 1 where the value loss applies: every action
                                        // token (token_gae) or each step's first action token,
                                        // i.e. V(s_t) at the last prompt token (step-level gae)
  int64_t trajectory = 0;               // index into the trajectory list
  std::string data_source;              // the trajectory's (Trajectory::data_source): which
                                        // distillation teacher scores the row
  int64_t num_action_tokens() const;
};

// Steps -> rows (see the top), once per RL step: the advantage column is zero until the
// estimator's output is scattered in (scatter_step_tokens). Steps with empty responses
// contribute no tokens. Throws Error if a step's logprob count differs from its
// response length.
std::vector<PackedRow> pack_trajectories(const std::vector<Trajectory>& trajs, bool merge_prefix_steps);

// traj_advantage[i] on every action token of trajectory i's rows (outcome advantages).
void set_trajectory_advantages(std::vector<PackedRow>& rows, const std::vector<float>& traj_advantage);
// pack_trajectories + set_trajectory_advantages.
std::vector<PackedRow> pack_trajectories(const std::vector<Trajectory>& trajs,
                                         const std::vector<float>& traj_advantage, bool merge_prefix_steps);

// Where a step's action tokens lie in the packed rows: rows[row].tokens[begin, begin + n).
// A step's response is contiguous in one row (pack_trajectories appends it whole).
struct TokenSpan {
  int64_t row = -1;     // -1 for a step without response tokens (n = 0)
  int64_t begin = 0;
  int64_t n = 0;
};
using StepSpans = std::vector<std::vector<TokenSpan>>;  // [trajectory][step], shaped like trajs

// The span of every step of `trajs` in `rows`. Throws Error if a row names a trajectory
// or step that `trajs` lacks, or a step's tokens are not one contiguous run.
StepSpans step_spans(const std::vector<PackedRow>& rows, const std::vector<Trajectory>& trajs);

// Per-token data shaped [trajectory][step][response token] (tests and one-off tools; the
// trainer reads and writes the rows' columns in place through StepSpans).
using StepTokenValues = std::vector<std::vector<std::vector<float>>>;

// Writes x[trajectory][step][k] into rows[*].*field at the action tokens that step s
// of the row's trajectory sampled (0 elsewhere; the field is resized to the row).
// Throws Error if x has fewer entries than a row's step needs.
void scatter_step_tokens(std::vector<PackedRow>& rows, const StepTokenValues& x,
                         std::vector<float> PackedRow::*field);
// The inverse: reads rows[*].*field at the action tokens into [trajectory][step][k],
// shaped like `trajs` (steps without response tokens stay empty). Throws Error if a
// row's field is empty.
StepTokenValues gather_step_tokens(const std::vector<PackedRow>& rows,
                                   const std::vector<Trajectory>& trajs,
                                   std::vector<float> PackedRow::*field);

// Mini-batches for one optimiser step each (Actor and Critic updates), as indices into
// rows (no copies): rows grouped by trajectory, so a trajectory's rows always share a
// step, `trajectories_per_mini` trajectories per group in first-appearance order (<= 0 =
// all in one group).
std::vector<std::vector<int64_t>> trajectory_mini_batches(const std::vector<PackedRow>& rows,
                                                          int64_t trajectories_per_mini);

// Groups rows[subset...] (indices into rows; the whole of rows without `subset`) into
// micro-batches of at most max_rows rows and max_tokens padded tokens (rows * longest;
// 0 = unlimited), rows sorted by length to limit padding, or with by_prefix in token
// order, so rows sharing prefixes (a group's samples, a trajectory's steps) fall into the
// same micro-batch (tree packing). Ties keep subset order. Returns indices into rows.
std::vector<std::vector<int64_t>> make_micro_batches(const std::vector<PackedRow>& rows,
                                                     const std::vector<int64_t>& subset, int64_t max_rows,
                                                     int64_t max_tokens = 0, bool by_prefix = false);
std::vector<std::vector<int64_t>> make_micro_batches(const std::vector<PackedRow>& rows,
                                                     int64_t max_rows, int64_t max_tokens = 0,
                                                     bool by_prefix = false);

// Tree packing (collate's `tree`): the micro-batch's rows laid out as a prefix tree,
// one node per distinct prefix, so every shared token (a group's prompt, earlier turns,
// a common system prompt) is forwarded once (Transformer::hidden_states_tree). A node
// belongs to the first row that reaches it and is attended from there, over that row's
// path. The [B,T] tensors keep the per-row layout (targets, masks, advantages);
// tree_index maps each of their columns to its node, so per-row hidden states are
// gathered from the tree's (scoring.h: batch_hidden_states). Log-probs, values and
// gradients equal the per-row computation (tested).
struct TrainBatch {
  at::Tensor tree_ids;         // [N] int64 node tokens (undefined unless tree-packed)
  at::Tensor tree_positions;   // [N] int64 node depth
  at::Tensor tree_index;       // [B,T] int64 node of input_ids[b,t] (0 on padding): the paths
  at::Tensor tree_own;         // [B,Q] int64 nodes row b owns (N on padding)
  at::Tensor tree_own_mask;    // [B,Q,T] bool: path positions each owned node attends to
  int64_t tree_nodes = 0;      // N
  at::Tensor prefix_ids;       // [P] int64 shared by every row (undefined when P = 0)
  int64_t prefix_len = 0;      // P
  at::Tensor input_ids;        // [B,T] int64: row tokens P.., padded with 0
  at::Tensor positions;        // [B,T] int64, P..len-1 (0 on padding)
  at::Tensor segment_ids;      // [B,T] int64, 0 on tokens, -1 on padding
  at::Tensor targets;          // [B,T-1] int64 = input_ids[:, 1:]
  at::Tensor action_mask;      // [B,T-1] fp32, 1 where targets is a response token
  at::Tensor advantages;       // [B,T-1] fp32
  at::Tensor rollout_logprobs; // [B,T-1] fp32, behaviour log-probs from the engine
  at::Tensor step_ids;         // [B,T-1] int64, PackedRow::step_of of the target token (the
                               // step that sampled it; -1 off actions): a row's sequences
  at::Tensor old_logprobs;     // [B,T-1] fp32 from PackedRow::old_logprob (undefined if empty)
  at::Tensor ref_logprobs;     // [B,T-1] fp32 from PackedRow::ref_logprob (undefined if empty)
  at::Tensor teacher_logprobs; // [B,T-1] fp32 from PackedRow::teacher_logprob (undefined if empty)
  at::Tensor teacher_topk_ids; // [B,T-1,K] int64 from PackedRow::teacher_topk_ids (undefined if
                               // empty; 0 off the rows' scored tokens)
  at::Tensor teacher_topk_logprobs;  // [B,T-1,K] fp32 from PackedRow::teacher_topk_logprob
  at::Tensor values;           // [B,T-1] fp32 from PackedRow::value (undefined if empty)
  at::Tensor returns;          // [B,T-1] fp32 from PackedRow::returns (undefined if empty)
  at::Tensor value_mask;       // [B,T-1] fp32 from PackedRow::value_mask (undefined if empty)
  std::vector<int64_t> rows;   // which PackedRow each batch row is
  int64_t num_action_tokens = 0;
  // Moves every defined tensor to `device` (in place).
  void to(at::Device device);
};

// Builds the tensors for rows[idx...] on `device`. With min_shared_prefix > 0 and two
// or more rows, a common prefix of at least that many tokens is split off (see above);
// 0 = never. With tree, the rows are tree-packed instead (see TrainBatch; no prefix is
// split off). The tensors are filled on the host (rows are host vectors), then moved
// to `device` when it is not the CPU; the default is the host for that reason.
TrainBatch collate(const std::vector<PackedRow>& rows, const std::vector<int64_t>& idx,
                   int64_t min_shared_prefix = 0, at::Device device = at::Device(at::kCPU), bool tree = false);

// Length of the prefix collate() would share for rows[idx...]: the longest common
// token prefix, ending at least one token before any row's first response token
// and before any row's last token.
int64_t shared_prefix_length(const std::vector<PackedRow>& rows, const std::vector<int64_t>& idx);

}  // namespace agentr1::train
