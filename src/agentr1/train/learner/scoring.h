// agentr1/train/learner/scoring.h — the no-grad scoring pass over packed rows: log-probs,
// entropy, critic values. Used for old log-probs (the policy before the update),
// reference log-probs (the frozen reference, no optimiser anywhere) and old values.
//
//   ScoringOptions so;  so.temperature = 0.7;  so.device = dev;
//   score_logprobs(policy, rows, &PackedRow::old_logprob, so);      // no grad, eval mode
//   score_logprobs(reference, rows, &PackedRow::ref_logprob, so);
//   score_rows(rows, &PackedRow::value, so, [&](const TrainBatch& b) { return value_predictions(vm, b); });
//
// Every field is written for every token of the row: the entry of token t is the score
// read at position t-1 (the state that produced token t); token 0 and, when collate
// shared a prefix, the prefix tokens 1..p get 0 (none of them is scored by a loss).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "agentr1/model/transformer.h"
#include "agentr1/train/learner/batch.h"

namespace agentr1::train {

struct ScoringOptions {
  int64_t micro_batch_size = 8;        // rows per forward
  int64_t micro_batch_max_tokens = 0;  // cap on rows x padded length; 0 = none
  int64_t min_shared_prefix = 16;      // collate's shared prefix (>= N tokens); 0 = off
  bool tree_packing = false;           // collate's tree packing (every shared prefix once)
  double temperature = 1.0;            // log-probs of logits / temperature (the sampler's); > 0
  at::Device device = at::Device(at::kCPU);  // where the forward runs (trainer.device)
};

// Final hidden states [B,T,H] of the batch's rows in its [B,T] layout (tree-packed
// batches run the tree once and gather each row's tokens from their nodes).
at::Tensor batch_hidden_states(model::TransformerImpl& model, const TrainBatch& batch);
// Logits [B,T-1,V] fp32 at positions 0..T-2 (which predict tokens 1..T-1). Untreed
// batches take the full forward and slice it, as before tree packing existed, so their
// numbers are bit for bit those of earlier versions.
at::Tensor batch_logits(model::TransformerImpl& model, const TrainBatch& batch);

// Log-probs of batch.targets under `model` with logits divided by `temperature`:
// [B,T-1] fp32. If entropy != nullptr it receives the per-position entropy [B,T-1] of
// the same distribution. Grad flows unless under NoGradGuard.
// With extra_ids [B,T-1,K] and extra_lp: *extra_lp receives the log-probs of those ids
// at each position [B,T-1,K], from the same distribution (grad flows; the student's
// log-probs of a teacher's top-k, algorithm.distill.loss=topk_fkl).
at::Tensor target_logprobs(model::Transformer& model, const TrainBatch& batch, at::Tensor* entropy = nullptr,
                           double temperature = 1.0, const at::Tensor& extra_ids = at::Tensor(),
                           at::Tensor* extra_lp = nullptr);

// Runs fn (-> [B,T-1] scores in the target layout) on micro-batches of rows without
// grad and writes rows[i].*field (resized to the row). The modules fn uses should be in
// eval mode; score_logprobs does that for its model.
void score_rows(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field, const ScoringOptions& opts,
                const std::function<at::Tensor(const TrainBatch&)>& fn);

// Fills rows[i].*field with each token's log-prob under `model` (and, if entropy_field
// is given, rows[i].*entropy_field with the entropy at that position). No grad; the
// model's training mode is restored afterwards.
void score_logprobs(model::Transformer& model, std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field,
                    const ScoringOptions& opts, std::vector<float> PackedRow::*entropy_field = nullptr);

// A distillation teacher's judgement of the rows (no grad; the model's training mode is
// restored): teacher_logprob of every token, and with topk > 0 teacher_topk_ids /
// teacher_topk_logprob, the topk most likely ids at each position (among ids < max_id
// when max_id > 0: the student's vocabulary) and their log-probs; token 0 and
// shared-prefix tokens get id 0 and log-prob 0, as in the other columns. topk = 0 takes
// score_logprobs' pass, so a teacher equal to the policy gives the policy's bits; topk > 0
// one pass through the head in chunks for both columns (equal to rounding).
void score_teacher(model::Transformer& model, std::vector<PackedRow>& rows, const ScoringOptions& opts,
                   int64_t topk, int64_t max_id = 0);

}  // namespace agentr1::train
