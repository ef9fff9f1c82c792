#include "agentr1/train/learner/scoring.h"

#include <torch/csrc/autograd/grad_mode.h>

#include "agentr1/core/error.h"
#include "agentr1/train/learner/chunked_logprobs.h"
#include "agentr1/train/memory_budget.h"

namespace agentr1::train {

at::Tensor batch_hidden_states(model::TransformerImpl& model, const TrainBatch& batch) {
  if (!batch.tree_ids.defined())
    return model.hidden_states(batch.input_ids, batch.positions, batch.segment_ids, batch.prefix_ids);
  const at::Tensor h = model.hidden_states_tree(batch.tree_ids, batch.tree_positions, batch.tree_index,
                                               batch.tree_own, batch.tree_own_mask);  // [N,H]
  const int64_t b = batch.tree_index.size(0), t = batch.tree_index.size(1);
  return h.index_select(0, batch.tree_index.reshape({-1})).view({b, t, h.size(1)});
}

at::Tensor batch_logits(model::TransformerImpl& model, const TrainBatch& batch) {
  if (!batch.tree_ids.defined())
    return model.forward(batch.input_ids, batch.positions, batch.segment_ids, batch.prefix_ids).slice(1, 0, -1);
  return model.logits_from_hidden(batch_hidden_states(model, batch).slice(/*dim=*/1, 0, -1));
}

at::Tensor target_logprobs(model::Transformer& model, const TrainBatch& batch, at::Tensor* entropy,
                           double temperature, const at::Tensor& extra_ids, at::Tensor* extra_lp) {
  const bool extra = extra_lp != nullptr;
  AGENTR1_CHECK(!extra || (extra_ids.dim() == 3 && extra_ids.size(0) == batch.targets.size(0) &&
                           extra_ids.size(1) == batch.targets.size(1)),
                "target_logprobs: extra ids " << extra_ids.sizes() << " do not fit targets " << batch.targets.sizes());
  // Logits beyond one chunk (~64 MiB fp32) go through the head chunk by chunk, forward and
  // backward (chunked_logprobs.h); smaller batches keep the dense path and its numbers.
  const int64_t chunk = logits_chunk_tokens(model->config().vocab_size);
  if (batch.targets.numel() > chunk) {
    const at::Tensor h = batch_hidden_states(*model, batch).slice(/*dim=*/1, 0, -1);  // [B,T-1,H]
    const int64_t B = h.size(0), T = h.size(1);
    if (extra) {  // the target and the K extra ids in one pass: [N, 1+K]
      const int64_t k = extra_ids.size(2);
      const at::Tensor ids = at::cat({batch.targets.reshape({-1, 1}), extra_ids.reshape({-1, k})}, /*dim=*/1);
      auto [lp, ent] = chunked_token_logprobs(h.reshape({B * T, h.size(2)}), model->lm_head_weight(), ids,
                                              temperature, chunk);
      if (entropy != nullptr) *entropy = ent.view({B, T});
      *extra_lp = lp.slice(/*dim=*/1, 1).reshape({B, T, k});
      return lp.select(/*dim=*/1, 0).reshape({B, T});
    }
    auto [lp, ent] = chunked_token_logprobs(h.reshape({B * T, h.size(2)}), model->lm_head_weight(),
                                            batch.targets.reshape({-1}), temperature, chunk);
    if (entropy != nullptr) *entropy = ent.view({B, T});
    return lp.view({B, T});
  }
  at::Tensor logits = batch_logits(*model, batch);  // [B,T-1,V]
  if (temperature != 1.0) logits = logits / temperature;
  at::Tensor logp_all = at::log_softmax(logits, /*dim=*/-1);  // [B,T-1,V]
  at::Tensor lp = logp_all.gather(/*dim=*/-1, batch.targets.unsqueeze(-1)).squeeze(-1);
  if (entropy != nullptr) *entropy = -(logp_all.exp() * logp_all).sum(/*dim=*/-1);
  if (extra) *extra_lp = logp_all.gather(/*dim=*/-1, extra_ids);
  return lp;
}

namespace {

// Writes a [B,T-1] host tensor into rows[b.rows[i]].*field.
void write_back(std::vector<PackedRow>& rows, const TrainBatch& b, std::vector<float> PackedRow::*field,
                const at::Tensor& host) {
  auto acc = host.accessor<float, 2>();
  const size_t p = static_cast<size_t>(b.prefix_len);
  for (size_t i = 0; i < b.rows.size(); ++i) {
    PackedRow& row = rows[static_cast<size_t>(b.rows[i])];
    std::vector<float>& out = row.*field;
    out.assign(row.tokens.size(), 0.0f);  // token 0 and prefix tokens 1..p stay 0
    for (size_t t = p + 1; t < row.tokens.size(); ++t) out[t] = acc[static_cast<int64_t>(i)][static_cast<int64_t>(t - p - 1)];
  }
}

// The rows are host vectors, so scores come back to host memory to be written there.
at::Tensor to_host(const at::Tensor& x) { return x.to(at::Device(at::kCPU), at::kFloat).contiguous(); }

}  // namespace

void score_rows(std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field, const ScoringOptions& o,
                const std::function<at::Tensor(const TrainBatch&)>& fn) {
  torch::NoGradGuard no_grad;
  for (const auto& mb : make_micro_batches(rows, o.micro_batch_size, o.micro_batch_max_tokens, o.tree_packing)) {
    const TrainBatch b = collate(rows, mb, o.min_shared_prefix, o.device, o.tree_packing);
    write_back(rows, b, field, to_host(fn(b)));
  }
}

void score_logprobs(model::Transformer& model, std::vector<PackedRow>& rows, std::vector<float> PackedRow::*field,
                    const ScoringOptions& o, std::vector<float> PackedRow::*entropy_field) {
  AGENTR1_CHECK(o.temperature > 0, "score_logprobs: temperature must be > 0, got " << o.temperature);
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  try {
    for (const auto& mb : make_micro_batches(rows, o.micro_batch_size, o.micro_batch_max_tokens, o.tree_packing)) {
      const TrainBatch b = collate(rows, mb, o.min_shared_prefix, o.device, o.tree_packing);
      at::Tensor ent;
      at::Tensor lp = target_logprobs(model, b, entropy_field != nullptr ? &ent : nullptr, o.temperature);
      write_back(rows, b, field, to_host(lp));
      if (entropy_field != nullptr) write_back(rows, b, entropy_field, to_host(ent));
    }
  } catch (...) {
    model->train(was_training);
    throw;
  }
  model->train(was_training);
}

void score_teacher(model::Transformer& model, std::vector<PackedRow>& rows, const ScoringOptions& o, int64_t topk,
                   int64_t max_id) {
  AGENTR1_CHECK(o.temperature > 0, "score_teacher: temperature must be > 0, got " << o.temperature);
  AGENTR1_CHECK(topk >= 0 && topk <= model->config().vocab_size,
                "score_teacher: topk " << topk << " is not in 0.." << model->config().vocab_size);
  if (topk == 0) {  // the sampled tokens only: the policy's own scoring pass, to its bits
    score_logprobs(model, rows, &PackedRow::teacher_logprob, o);
    return;
  }
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const size_t k = static_cast<size_t>(topk);
  try {
    for (const auto& mb : make_micro_batches(rows, o.micro_batch_size, o.micro_batch_max_tokens, o.tree_packing)) {
      const TrainBatch b = collate(rows, mb, o.min_shared_prefix, o.device, o.tree_packing);
      const at::Tensor h = batch_hidden_states(*model, b).slice(/*dim=*/1, 0, -1);  // [B,T-1,H]
      const int64_t B = h.size(0), T = h.size(1);
      const TopkLogprobs t = chunked_topk_logprobs(h.reshape({B * T, h.size(2)}), model->lm_head_weight(), topk,
                                                   o.temperature, logits_chunk_tokens(model->config().vocab_size),
                                                   b.targets.reshape({-1}), max_id);
      write_back(rows, b, &PackedRow::teacher_logprob, to_host(t.target_lp).view({B, T}));
      const at::Tensor ids_h = t.ids.to(at::Device(at::kCPU)).view({B, T, topk}).contiguous();
      const at::Tensor lp_h = to_host(t.lp).view({B, T, topk});
      auto ia = ids_h.accessor<int64_t, 3>();
      auto la = lp_h.accessor<float, 3>();
      const size_t p = static_cast<size_t>(b.prefix_len);
      for (size_t i = 0; i < b.rows.size(); ++i) {
        PackedRow& row = rows[static_cast<size_t>(b.rows[i])];
        row.teacher_topk_ids.assign(row.tokens.size() * k, 0);
        row.teacher_topk_logprob.assign(row.tokens.size() * k, 0.0f);
        for (size_t tk = p + 1; tk < row.tokens.size(); ++tk)
          for (size_t j = 0; j < k; ++j) {
            const int64_t c = static_cast<int64_t>(tk - p - 1);
            row.teacher_topk_ids[tk * k + j] = static_cast<int32_t>(ia[static_cast<int64_t>(i)][c][static_cast<int64_t>(j)]);
            row.teacher_topk_logprob[tk * k + j] = la[static_cast<int64_t>(i)][c][static_cast<int64_t>(j)];
          }
      }
    }
  } catch (...) {
    model->train(was_training);
    throw;
  }
  model->train(was_training);
}

}  // namespace agentr1::train
