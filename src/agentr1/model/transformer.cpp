// Decoder-only transformer (Qwen2 / Qwen3 / Llama), written from the HF formulas:
//   x = embed(ids)
//   per layer: x += o_proj(attn(rope(q_norm?(q_proj(rms(x)))), rope(k_norm?(k_proj(..))), v))
//              x += down_proj(silu(gate_proj(rms(x))) * up_proj(rms(x)))
//   logits = lm_head(rms(x))      (lm_head = embed_tokens when tied)
#include "agentr1/model/transformer.h"

#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "agentr1/core/error.h"

namespace agentr1::model {

namespace {

using at::indexing::Slice;

// y = x W^T + b; weight [out, in]. Parameters only: no global-RNG initialisation
// (init_random / load_pretrained fill them).
struct LinearImpl : torch::nn::Module {
  LinearImpl(int64_t in, int64_t out, bool with_bias) {
    weight = register_parameter("weight", at::zeros({out, in}));
    if (with_bias) bias = register_parameter("bias", at::zeros({out}));
  }
  // x: [..., in] -> [..., out]
  at::Tensor forward(const at::Tensor& x) { return at::linear(x, weight, bias); }
  at::Tensor weight, bias;
};

struct EmbeddingImpl : torch::nn::Module {
  EmbeddingImpl(int64_t vocab, int64_t dim) { weight = register_parameter("weight", at::zeros({vocab, dim})); }
  // ids: [B,T] int64 -> [B,T,dim]
  at::Tensor forward(const at::Tensor& ids) { return at::embedding(weight, ids); }
  at::Tensor weight;
};

// HF RMSNorm: normalise in fp32, cast back to the input dtype, then scale.
struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps) : eps(eps) { weight = register_parameter("weight", at::ones({dim})); }
  // x: [..., dim] -> [..., dim]
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor var = xf.pow(2).mean(/*dim=*/{-1}, /*keepdim=*/true);
    return weight * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
  }
  at::Tensor weight;
  double eps;
};

// cat(-x2, x1) over the two halves of the last dim (HF rotate_half, non-interleaved).
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, /*dim=*/-1);
}

// RoPE tables for a set of positions: [B,1,T,hd] each.
struct Rope {
  at::Tensor cos, sin;
};

// Where new keys/values go in a KV cache (forward_cached only).
struct CacheWrite {
  KVCache* cache = nullptr;
  at::Tensor flat_src;   // [N] index into the [B*T] new tokens that are valid
  at::Tensor slot_idx;   // [N] destination slot of each
  at::Tensor pos_idx;    // [N] destination position of each
  at::Tensor slots;      // [B] slot of each row
  int64_t span = 0;      // keys to attend over: max over rows of len + n_new
};

struct AttentionImpl : torch::nn::Module {
  explicit AttentionImpl(const ModelConfig& c)
      : n_heads(c.num_attention_heads), n_kv(c.num_key_value_heads), head_dim(c.head_dim) {
    const int64_t H = c.hidden_size;
    q_proj = register_module("q_proj", std::make_shared<LinearImpl>(H, n_heads * head_dim, c.attention_bias));
    k_proj = register_module("k_proj", std::make_shared<LinearImpl>(H, n_kv * head_dim, c.attention_bias));
    v_proj = register_module("v_proj", std::make_shared<LinearImpl>(H, n_kv * head_dim, c.attention_bias));
    o_proj = register_module("o_proj", std::make_shared<LinearImpl>(n_heads * head_dim, H, false));
    if (c.qk_norm) {
      q_norm = register_module("q_norm", std::make_shared<RMSNormImpl>(head_dim, c.rms_norm_eps));
      k_norm = register_module("k_norm", std::make_shared<RMSNormImpl>(head_dim, c.rms_norm_eps));
    }
  }

  // q [B,nH,T,hd], k/v [B,nKV,T,hd] of x [B,T,H] (norms and RoPE applied).
  std::array<at::Tensor, 3> qkv(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    const int64_t B = x.size(0), T = x.size(1);
    at::Tensor q = q_proj->forward(x).view({B, T, n_heads, head_dim});
    at::Tensor k = k_proj->forward(x).view({B, T, n_kv, head_dim});
    at::Tensor v = v_proj->forward(x).view({B, T, n_kv, head_dim});
    if (q_norm) {  // per head, before RoPE
      q = q_norm->forward(q);
      k = k_norm->forward(k);
    }
    q = q.transpose(1, 2);  // [B,nH,T,hd]
    k = k.transpose(1, 2);  // [B,nKV,T,hd]
    q = (q * cos + rotate_half(q) * sin).contiguous();
    k = k * cos + rotate_half(k) * sin;
    return {q, k, v.transpose(1, 2)};
  }

  // Softmax attention of q [B,nH,T,hd] over k/v [B,nKV,S,hd]; blocked [B|1,1,1,T,S]
  // bool, true where a query may not see a key. Returns o_proj of the result [B,T,H].
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked) {
    const int64_t B = q.size(0), T = q.size(2);
    const int64_t S = k.size(2), rep = n_heads / n_kv;
    // GQA without copying k/v: query head h = g*rep + r uses kv head g.
    at::Tensor qg = q.view({B, n_kv, rep * T, head_dim});
    at::Tensor scores = at::matmul(qg, k.transpose(-1, -2)).mul_(1.0 / std::sqrt(static_cast<double>(head_dim)));
    scores = scores.view({B, n_kv, rep, T, S});
    scores.masked_fill_(blocked, -std::numeric_limits<double>::infinity());
    at::Tensor probs = at::softmax(scores, /*dim=*/-1, at::kFloat).to(q.scalar_type());
    at::Tensor out = at::matmul(probs.view({B, n_kv, rep * T, S}), v);  // [B,nKV,rep*T,hd]
    out = out.view({B, n_heads, T, head_dim}).transpose(1, 2).reshape({B, T, n_heads * head_dim});
    return o_proj->forward(out);
  }

  // x: [B,T,H]; cos/sin: [B,1,T,hd]; blocked: [B|1,1,1,T,S] bool, true where a query
  // may not see a key (S = T without a cache). Returns [B,T,H].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& blocked, int64_t layer, const CacheWrite* cw) {
    const int64_t B = x.size(0), T = x.size(1);
    auto [q, k, v] = qkv(x, cos, sin);
    if (cw) {
      // Append the valid new keys/values to their slots, then attend over each
      // row's slot [0, span) (positions beyond a row's length are masked).
      KVCache& cache = *cw->cache;
      const at::Tensor kn = k.transpose(1, 2).reshape({B * T, n_kv, head_dim}).index_select(0, cw->flat_src);
      const at::Tensor vn = v.transpose(1, 2).reshape({B * T, n_kv, head_dim}).index_select(0, cw->flat_src);
      cache.k(layer).index_put_({cw->slot_idx, Slice(), cw->pos_idx}, kn);
      cache.v(layer).index_put_({cw->slot_idx, Slice(), cw->pos_idx}, vn);
      k = cache.k(layer).narrow(2, 0, cw->span).index_select(0, cw->slots);  // [B,nKV,S,hd]
      v = cache.v(layer).narrow(2, 0, cw->span).index_select(0, cw->slots);
    }
    return attend(q, k, v, blocked);
  }

  // Shared prefix: xp [1,P,H] is the prefix every row starts with, xs [B,T,H] the rest
  // of each row. The prefix attends causally to itself; row tokens attend to the whole
  // prefix plus their own keys as blocked_s [B|1,1,1,T,P+T] allows. Autograd sums the
  // gradient of the prefix's keys/values over the rows, so gradients equal those of
  // the B full rows.
  std::pair<at::Tensor, at::Tensor> forward_shared(const at::Tensor& xp, const at::Tensor& xs, const Rope& rp,
                                                   const Rope& rs, const at::Tensor& blocked_p,
                                                   const at::Tensor& blocked_s) {
    const int64_t B = xs.size(0);
    auto [qp, kp, vp] = qkv(xp, rp.cos, rp.sin);
    auto [qs, ks, vs] = qkv(xs, rs.cos, rs.sin);
    at::Tensor op = attend(qp, kp, vp, blocked_p);
    at::Tensor k = at::cat({kp.expand({B, -1, -1, -1}), ks}, /*dim=*/2);
    at::Tensor v = at::cat({vp.expand({B, -1, -1, -1}), vs}, /*dim=*/2);
    return {op, attend(qs, k, v, blocked_s)};
  }

  int64_t n_heads, n_kv, head_dim;
  std::shared_ptr<LinearImpl> q_proj, k_proj, v_proj, o_proj;
  std::shared_ptr<RMSNormImpl> q_norm, k_norm;
};

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const ModelConfig& c) {
    gate_proj = register_module("gate_proj", std::make_shared<LinearImpl>(c.hidden_size, c.intermediate_size, false));
    up_proj = register_module("up_proj", std::make_shared<LinearImpl>(c.hidden_size, c.intermediate_size, false));
    down_proj = register_module("down_proj", std::make_shared<LinearImpl>(c.intermediate_size, c.hidden_size, false));
  }
  // x: [B,T,H] -> [B,T,H]
  at::Tensor forward(const at::Tensor& x) {
    return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));
  }
  std::shared_ptr<LinearImpl> gate_proj, up_proj, down_proj;
};

struct DecoderLayerImpl : torch::nn::Module {
  explicit DecoderLayerImpl(const ModelConfig& c) {
    self_attn = register_module("self_attn", std::make_shared<AttentionImpl>(c));
    mlp = register_module("mlp", std::make_shared<MLPImpl>(c));
    input_layernorm = register_module("input_layernorm", std::make_shared<RMSNormImpl>(c.hidden_size, c.rms_norm_eps));
    post_attention_layernorm =
        register_module("post_attention_layernorm", std::make_shared<RMSNormImpl>(c.hidden_size, c.rms_norm_eps));
  }
  // x: [B,T,H] -> [B,T,H]
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& blocked,
                     int64_t layer, const CacheWrite* cw) {
    at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, blocked, layer, cw);
    return h + mlp->forward(post_attention_layernorm->forward(h));
  }
  // Shared-prefix form of forward (see AttentionImpl::forward_shared).
  std::pair<at::Tensor, at::Tensor> forward_shared(const at::Tensor& xp, const at::Tensor& xs, const Rope& rp,
                                                   const Rope& rs, const at::Tensor& blocked_p,
                                                   const at::Tensor& blocked_s) {
    auto [ap, as] = self_attn->forward_shared(input_layernorm->forward(xp), input_layernorm->forward(xs), rp, rs,
                                              blocked_p, blocked_s);
    at::Tensor hp = xp + ap, hs = xs + as;
    return {hp + mlp->forward(post_attention_layernorm->forward(hp)),
            hs + mlp->forward(post_attention_layernorm->forward(hs))};
  }
  std::shared_ptr<AttentionImpl> self_attn;
  std::shared_ptr<MLPImpl> mlp;
  std::shared_ptr<RMSNormImpl> input_layernorm, post_attention_layernorm;
};

// The "model." prefix of HF names.
struct BodyImpl : torch::nn::Module {
  explicit BodyImpl(const ModelConfig& c) {
    embed_tokens = register_module("embed_tokens", std::make_shared<EmbeddingImpl>(c.vocab_size, c.hidden_size));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      auto l = std::make_shared<DecoderLayerImpl>(c);
      layers->push_back(l);
      layer_ptrs.push_back(l);
    }
    norm = register_module("norm", std::make_shared<RMSNormImpl>(c.hidden_size, c.rms_norm_eps));
  }
  std::shared_ptr<EmbeddingImpl> embed_tokens;
  torch::nn::ModuleList layers;
  std::vector<std::shared_ptr<DecoderLayerImpl>> layer_ptrs;
  std::shared_ptr<RMSNormImpl> norm;
};

}  // namespace

struct TransformerImpl::Impl {
  std::shared_ptr<BodyImpl> body;
  std::shared_ptr<LinearImpl> lm_head;  // null when tied to embed_tokens

  // positions: [B,T] int64 -> cos, sin: [B,1,T,hd] in `dtype` (HF: fp32 angles, then cast).
  std::pair<at::Tensor, at::Tensor> rope(const ModelConfig& c, const at::Tensor& positions, at::ScalarType dtype) const {
    const auto fopts = at::TensorOptions().dtype(at::kFloat).device(positions.device());
    at::Tensor exponent = at::arange(0, c.head_dim, 2, fopts.dtype(at::kLong)).to(at::kFloat) / c.head_dim;
    at::Tensor inv_freq = at::pow(c.rope_theta, exponent).reciprocal();          // [hd/2]
    at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;       // [B,T,hd/2]
    at::Tensor emb = at::cat({freqs, freqs}, /*dim=*/-1);                       // [B,T,hd]
    return {emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)};
  }

  // x: [B,T,H] through all layers (not the final norm); allowed: [B|1,T,S] bool.
  at::Tensor layers(const ModelConfig& c, at::Tensor x, const at::Tensor& positions, const at::Tensor& allowed,
                    const CacheWrite* cw) const {
    auto [cos, sin] = rope(c, positions, x.scalar_type());
    const at::Tensor blocked = allowed.logical_not().unsqueeze(1).unsqueeze(1);  // [B|1,1,1,T,S]
    for (size_t i = 0; i < body->layer_ptrs.size(); ++i)
      x = body->layer_ptrs[i]->forward(x, cos, sin, blocked, static_cast<int64_t>(i), cw);
    return x;
  }
};

TransformerImpl::TransformerImpl(const ModelConfig& cfg) : cfg_(cfg), impl_(std::make_shared<Impl>()) {
  cfg_.validate();
  impl_->body = register_module("model", std::make_shared<BodyImpl>(cfg_));
  if (!cfg_.tie_word_embeddings)
    impl_->lm_head = register_module("lm_head", std::make_shared<LinearImpl>(cfg_.hidden_size, cfg_.vocab_size, false));
}

at::Tensor TransformerImpl::hidden_states(const at::Tensor& ids, const at::Tensor& positions,
                                          const at::Tensor& segment_ids, const at::Tensor& prefix_ids) {
  AGENTR1_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong,
                "Transformer::forward: ids must be [B,T] int64, got " << ids.sizes() << " " << ids.scalar_type());
  const bool shared = prefix_ids.defined() && prefix_ids.numel() > 0;
  if (shared)
    AGENTR1_CHECK(prefix_ids.dim() == 1 && prefix_ids.scalar_type() == at::kLong,
                  "Transformer::forward: prefix_ids must be [P] int64, got " << prefix_ids.sizes() << " "
                                                                            << prefix_ids.scalar_type());
  const int64_t B = ids.size(0), T = ids.size(1), P = shared ? prefix_ids.size(0) : 0;
  const auto lopts = at::TensorOptions().dtype(at::kLong).device(ids.device());
  at::Tensor pos = positions;
  if (pos.defined()) {
    AGENTR1_CHECK(pos.sizes() == ids.sizes(), "Transformer::forward: positions " << pos.sizes()
                                                                                 << " must match ids " << ids.sizes());
  } else {
    pos = at::arange(P, P + T, lopts).unsqueeze(0).expand({B, T});
  }
  const auto bopts = at::TensorOptions().dtype(at::kBool).device(ids.device());
  at::Tensor allowed = at::ones({T, T}, bopts).tril().unsqueeze(0);  // [1,T,T] causal
  if (segment_ids.defined()) {
    AGENTR1_CHECK(segment_ids.sizes() == ids.sizes(), "Transformer::forward: segment_ids " << segment_ids.sizes()
                                                                                         << " must match ids "
                                                                                         << ids.sizes());
    const at::Tensor seg = segment_ids.to(at::kLong);
    allowed = allowed.logical_and(seg.unsqueeze(2) == seg.unsqueeze(1)).logical_and(seg.unsqueeze(1) >= 0);
    // Padding rows would have no key at all: let every token see itself (no NaN).
    allowed = allowed.logical_or(at::eye(T, bopts).unsqueeze(0));  // [B,T,T]
  }
  at::Tensor x = impl_->body->embed_tokens->forward(ids);
  if (!shared) {
    x = impl_->layers(cfg_, x, pos, allowed, nullptr);
    return impl_->body->norm->forward(x);
  }
  // Shared prefix: computed once ([1,P]); every row's tokens see all of it.
  at::Tensor xp = impl_->body->embed_tokens->forward(prefix_ids.unsqueeze(0));  // [1,P,H]
  at::Tensor pos_p = at::arange(P, lopts).unsqueeze(0);
  const at::Tensor allowed_p = at::ones({P, P}, bopts).tril().unsqueeze(0);     // [1,P,P]
  at::Tensor allowed_s = at::cat({at::ones({allowed.size(0), T, P}, bopts), allowed}, /*dim=*/2);  // [B|1,T,P+T]
  auto [cp, sp] = impl_->rope(cfg_, pos_p, x.scalar_type());
  auto [cs, ss] = impl_->rope(cfg_, pos, x.scalar_type());
  const Rope rp{cp, sp}, rs{cs, ss};
  const at::Tensor blocked_p = allowed_p.logical_not().unsqueeze(1).unsqueeze(1);
  const at::Tensor blocked_s = allowed_s.logical_not().unsqueeze(1).unsqueeze(1);
  for (const auto& layer : impl_->body->layer_ptrs) std::tie(xp, x) = layer->forward_shared(xp, x, rp, rs, blocked_p, blocked_s);
  return impl_->body->norm->forward(x);
}

at::Tensor TransformerImpl::logits_from_hidden(const at::Tensor& hidden) {
  const at::Tensor& w = impl_->lm_head ? impl_->lm_head->weight : impl_->body->embed_tokens->weight;
  return at::linear(hidden, w).to(at::kFloat);
}

at::Tensor TransformerImpl::forward(const at::Tensor& ids, const at::Tensor& positions,
                                    const at::Tensor& segment_ids, const at::Tensor& prefix_ids) {
  return logits_from_hidden(hidden_states(ids, positions, segment_ids, prefix_ids));
}

at::Tensor TransformerImpl::forward_cached(const at::Tensor& ids, const std::vector<int64_t>& slots,
                                           const std::vector<int64_t>& n_new, KVCache& cache) {
  at::NoGradGuard no_grad;  // inference only: cache writes must not record autograd history
  AGENTR1_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong,
                "forward_cached: ids must be [B,T] int64, got " << ids.sizes() << " " << ids.scalar_type());
  const int64_t B = ids.size(0), T = ids.size(1);
  AGENTR1_CHECK(static_cast<int64_t>(slots.size()) == B && static_cast<int64_t>(n_new.size()) == B,
                "forward_cached: ids has " << B << " rows but slots has " << slots.size() << " and n_new "
                                           << n_new.size());
  AGENTR1_CHECK(B >= 1 && T >= 1, "forward_cached: ids must be non-empty, got " << ids.sizes());
  AGENTR1_CHECK(cache.num_layers() == cfg_.num_hidden_layers,
                "forward_cached: cache has " << cache.num_layers() << " layers, model has " << cfg_.num_hidden_layers);
  const at::Tensor& w = impl_->body->embed_tokens->weight;
  AGENTR1_CHECK(cache.k(0).scalar_type() == w.scalar_type() && cache.k(0).device() == w.device(),
                "forward_cached: cache is " << cache.k(0).scalar_type() << " on " << cache.k(0).device()
                                            << " but the model is " << w.scalar_type() << " on " << w.device()
                                            << "; create the KVCache with the model's dtype and device");
  std::set<int64_t> seen;
  std::vector<int64_t> flat, slot_idx, pos_idx, positions(static_cast<size_t>(B * T)), lens(static_cast<size_t>(B));
  int64_t span = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = slots[b], n = n_new[b];
    AGENTR1_CHECK(s >= 0 && s < cache.n_slots(), "forward_cached: slot " << s << " out of range [0, "
                                                                        << cache.n_slots() << ")");
    AGENTR1_CHECK(seen.insert(s).second, "forward_cached: slot " << s << " appears twice in one call");
    AGENTR1_CHECK(n >= 1 && n <= T, "forward_cached: n_new[" << b << "] = " << n << " must be in [1, T=" << T << "]");
    const int64_t len = cache.length(s);
    AGENTR1_CHECK(len + n <= cache.max_len(), "forward_cached: slot " << s << " holds " << len << " tokens; adding "
                                                                     << n << " exceeds max_len " << cache.max_len());
    lens[b] = len;
    span = std::max(span, len + n);
    for (int64_t t = 0; t < T; ++t) positions[b * T + t] = len + t;
    for (int64_t t = 0; t < n; ++t) {
      flat.push_back(b * T + t);
      slot_idx.push_back(s);
      pos_idx.push_back(len + t);
    }
  }
  const at::Device dev = ids.device();
  auto to_dev = [&](std::vector<int64_t>& v, at::IntArrayRef shape) {
    return at::from_blob(v.data(), shape, at::kLong).to(dev, /*non_blocking=*/false, /*copy=*/true);
  };
  CacheWrite cw;
  cw.cache = &cache;
  cw.flat_src = to_dev(flat, {static_cast<int64_t>(flat.size())});
  cw.slot_idx = to_dev(slot_idx, {static_cast<int64_t>(slot_idx.size())});
  cw.pos_idx = to_dev(pos_idx, {static_cast<int64_t>(pos_idx.size())});
  std::vector<int64_t> slots_copy = slots;
  cw.slots = to_dev(slots_copy, {B});
  cw.span = span;
  at::Tensor pos = to_dev(positions, {B, T});
  // Query t of row b sees keys j <= len_b + t (cached prefix + causal within the chunk).
  at::Tensor keys = at::arange(span, at::TensorOptions().dtype(at::kLong).device(dev));
  at::Tensor allowed = keys.view({1, 1, span}) <= pos.unsqueeze(-1);  // [B,T,S]

  at::Tensor x = impl_->body->embed_tokens->forward(ids);
  x = impl_->layers(cfg_, x, pos, allowed, &cw);  // [B,T,H]
  std::vector<int64_t> last(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) last[b] = b * T + n_new[b] - 1;
  at::Tensor h = x.reshape({B * T, x.size(2)}).index_select(0, to_dev(last, {B}));  // [B,H]
  for (int64_t b = 0; b < B; ++b) cache.set_length(slots[b], lens[b] + n_new[b]);
  return logits_from_hidden(impl_->body->norm->forward(h));
}

at::Tensor token_logprobs(Transformer& model, const at::Tensor& ids) {
  AGENTR1_CHECK(ids.dim() == 2 && ids.size(1) >= 1, "token_logprobs: ids must be [B,T] with T >= 1, got "
                                                        << ids.sizes());
  const int64_t T = ids.size(1);
  if (T == 1) return at::zeros({ids.size(0), 0}, at::TensorOptions().dtype(at::kFloat).device(ids.device()));
  at::Tensor h = model->hidden_states(ids).narrow(1, 0, T - 1);                // [B,T-1,H]
  at::Tensor logp = at::log_softmax(model->logits_from_hidden(h), /*dim=*/-1);  // [B,T-1,V]
  return logp.gather(-1, ids.narrow(1, 1, T - 1).unsqueeze(-1)).squeeze(-1);
}

}  // namespace agentr1::model
