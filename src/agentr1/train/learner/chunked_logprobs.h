// agentr1/train/learner/chunked_logprobs.h — token log-probs and entropies through the LM
// head in chunks of tokens, forward and backward, never the whole [N, vocab] logits.
//
//   auto [lp, ent] = chunked_token_logprobs(hidden, head_weight, targets, temperature, chunk);
//   // hidden [N,H], head_weight [V,H], targets [N] -> lp [N], ent [N] (fp32); grad flows
//
// Why: with Qwen's 152k vocabulary a 4k-token micro-batch has 2.5 GB of fp32 logits, and
// autograd keeps the log-softmax (and the entropy's products) of all of them until the
// backward pass. Here the forward keeps only hidden, the targets and two numbers per
// token (log-sum-exp and entropy); the backward recomputes each chunk's logits and forms
//   dL/dz = g_lp (onehot(y) - p) - g_ent p (log p + H)       (z = logits / temperature)
// then dL/dhidden = dL/dz W / T and dL/dW = (dL/dz)^T hidden / T, chunk by chunk. Peak
// extra memory: a few [chunk, V] fp32 blocks. Values equal the dense path's to fp32
// rounding (the test compares values and gradients, with the head frozen and trained).
#pragma once

#include <cstdint>
#include <utility>

#include <ATen/ATen.h>

namespace agentr1::train {

// lp[i] = log softmax(hidden[i] W^T / temperature)[targets[i]], ent[i] = its entropy.
// targets may also be [N,K] (K ids per token, e.g. a teacher's top-k): lp is then [N,K]
// and its gradient reaches the logits as sum_k g_ik (onehot(y_ik) - p_i).
// chunk: tokens per block (>= 1). hidden and W may be any float dtype (the logits are
// formed as the dense path forms them: in that dtype, then fp32).
std::pair<at::Tensor, at::Tensor> chunked_token_logprobs(const at::Tensor& hidden, const at::Tensor& head_weight,
                                                         const at::Tensor& targets, double temperature,
                                                         int64_t chunk);

// The k most likely ids of every token's distribution and their log-probs, chunk by
// chunk, no grad, in descending order of log-prob: ids [N,k] int64, lp [N,k] fp32; with
// targets [N], also each target's log-prob target_lp [N] from the same pass. max_id > 0:
// the top k among ids < max_id only (a teacher whose head has padding rows beyond the
// student's vocabulary), the log-probs still normalised over the whole head.
struct TopkLogprobs {
  at::Tensor ids, lp, target_lp;
};
TopkLogprobs chunked_topk_logprobs(const at::Tensor& hidden, const at::Tensor& head_weight, int64_t k,
                                   double temperature, int64_t chunk, const at::Tensor& targets = at::Tensor(),
                                   int64_t max_id = 0);

// Chunk size: train/memory_budget.h logits_chunk_tokens (the memory plan counts it).

}  // namespace agentr1::train
