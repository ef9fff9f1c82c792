// Decoder-only transformer (Qwen2 / Qwen3 / Llama), written from the HF formulas:
//   x = embed(ids)
//   per layer: x += o_proj(attn(rope(q_norm?(q_proj(rms(x)))), rope(k_norm?(k_proj(..))), v))
//              x += down_proj(silu(gate_proj(rms(x))) * up_proj(rms(x)))
//   logits = lm_head(rms(x))      (lm_head = embed_tokens when tied)
#include "agentr1/model/transformer.h"

#include <array>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "agentr1/core/error.h"
#include "agentr1/model/blocked_attention.h"
#include "agentr1/model/lora.h"
#include "agentr1/model/paged_attention.h"
#include "agentr1/model/decode_layout.h"
#include "agentr1/model/row_linear.h"

namespace agentr1::model {

namespace {

using at::indexing::Slice;

// True on a thread running a checkpointed layer's first, unrecorded forward: it must
// compute what the recorded recomputation will (training-mode dropout included).
thread_local bool t_checkpoint_forward = false;

// y = x W^T + b; weight [out, in]. Parameters only: no global-RNG initialisation
// (init_random / load_pretrained fill them). With a LoRA adapter (lora.h) y gains
// scaling * (dropout(x) A^T) B^T unless this thread is inside a BaseOnly.
struct LinearImpl : torch::nn::Module {
  LinearImpl(int64_t in, int64_t out, bool with_bias) {
    weight = register_parameter("weight", at::zeros({out, in}));
    if (with_bias) bias = register_parameter("bias", at::zeros({out}));
  }
  // x: [..., in] -> [..., out]
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = at::linear(x, weight, bias);
    if (!adapted()) return y;
    // Dropout only while training with gradients (the engine's no-grad passes never drop).
    const bool drop =
        lora_dropout > 0 && is_training() && (at::GradMode::is_enabled() || t_checkpoint_forward);
    const at::Tensor xa = (drop ? at::dropout(x, lora_dropout, /*train=*/true) : x).to(lora_A.scalar_type());
    return y + (at::linear(at::linear(xa, lora_A), lora_B) * lora_scaling).to(y.scalar_type());
  }
  // True when this projection has an adapter and adapters are on for this thread.
  bool adapted() const { return lora_A.defined() && adapters_active(); }
  // Adds the adapter: A [r,in] ~ U(-1/sqrt(in), 1/sqrt(in)) (PEFT's kaiming-uniform with
  // a = sqrt(5)), B [out,r] = 0, in fp32 on the weight's device whatever the base's dtype:
  // a bf16 base keeps fp32 adapters (and fp32 optimiser moments); the adapter's product
  // is formed in fp32 and rounded once into the output's dtype.
  void add_adapter(int64_t r, double scaling, double dropout, at::Generator& gen) {
    const int64_t in = weight.size(1), out = weight.size(0);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    at::Tensor a = at::empty({r, in}, at::TensorOptions().dtype(at::kFloat)).uniform_(-bound, bound, gen);
    lora_A = register_parameter("lora_A", a.to(weight.device()));
    lora_B = register_parameter("lora_B", at::zeros({out, r}, weight.options().dtype(at::kFloat)));
    lora_scaling = scaling;
    lora_dropout = dropout;
  }
  // scaling * B A [out,in] in fp32 (merging, saving a plain model).
  at::Tensor delta() const {
    return at::mm(lora_B.detach().to(at::kFloat), lora_A.detach().to(at::kFloat)).mul_(lora_scaling);
  }
  at::Tensor weight, bias;
  at::Tensor lora_A, lora_B;  // undefined without an adapter
  double lora_scaling = 0, lora_dropout = 0;
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
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    if (attention_block > 0 && S > attention_block) {  // tiles with an online softmax
      const at::Tensor out = detail::blocked_attention(q, k, v, blocked, scale, attention_block);
      return o_proj->forward(out.transpose(1, 2).reshape({B, T, n_heads * head_dim}));
    }
    // GQA without copying k/v: query head h = g*rep + r uses kv head g.
    at::Tensor qg = q.view({B, n_kv, rep * T, head_dim});
    at::Tensor scores = at::matmul(qg, k.transpose(-1, -2)).mul_(scale);
    scores = scores.view({B, n_kv, rep, T, S});
    scores.masked_fill_(blocked, -std::numeric_limits<double>::infinity());
    at::Tensor probs = at::softmax(scores, /*dim=*/-1, at::kFloat).to(q.scalar_type());
    at::Tensor out = at::matmul(probs.view({B, n_kv, rep * T, S}), v);  // [B,nKV,rep*T,hd]
    out = out.view({B, n_heads, T, head_dim}).transpose(1, 2).reshape({B, T, n_heads * head_dim});
    return o_proj->forward(out);
  }

  // x: [B,T,H]; cos/sin: [B,1,T,hd]; blocked: [B|1,1,1,T,T] bool, true where a query
  // may not see a key. Returns [B,T,H].
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& blocked) {
    auto [q, k, v] = qkv(x, cos, sin);
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
  int64_t attention_block = kDefaultAttentionBlock;  // TransformerImpl::set_attention_block
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
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& blocked) {
    at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), cos, sin, blocked);
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

// Activation checkpointing of one decoder layer (TransformerImpl::set_gradient_checkpointing):
// the forward runs without recording and keeps only the layer's inputs; the backward runs
// the layer again with grad (restoring the CPU generator, so LoRA dropout draws the same
// masks) and back-propagates through that one recomputed layer, accumulating its
// parameters' gradients. Peak activation memory: one layer's, plus every layer's input.
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Marks this thread as inside a checkpointed layer's unrecorded forward.
struct UnrecordedForward {
  UnrecordedForward() : prev(t_checkpoint_forward) { t_checkpoint_forward = true; }
  ~UnrecordedForward() { t_checkpoint_forward = prev; }
  bool prev;
};

at::Tensor cpu_rng_state() { return at::detail::getDefaultCPUGenerator().get_state(); }
void set_cpu_rng_state(const at::Tensor& s) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(s);
}

// Re-runs `fn` with grad from detached copies of `inputs` (the generator as it was at the
// forward), back-propagates `grads` through it and returns the inputs' gradients.
variable_list recompute_and_backward(const variable_list& inputs, const at::Tensor& rng, const variable_list& grads,
                                     const std::function<variable_list(const variable_list&)>& fn) {
  variable_list leaves;
  for (const auto& x : inputs) leaves.push_back(x.detach().requires_grad_(true));
  variable_list outs;
  {
    at::AutoGradMode grad_on(true);
    const at::Tensor now = cpu_rng_state();
    set_cpu_rng_state(rng);
    outs = fn(leaves);
    set_cpu_rng_state(now);
  }
  variable_list os, gs;
  for (size_t i = 0; i < outs.size(); ++i)
    if (grads[i].defined() && outs[i].requires_grad()) {
      os.push_back(outs[i]);
      gs.push_back(grads[i]);
    }
  if (!os.empty()) torch::autograd::backward(os, gs);
  variable_list out;
  for (auto& l : leaves) out.push_back(l.grad());
  return out;
}

struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            const at::Tensor& blocked, int64_t layer) {
    ctx->save_for_backward({x, cos, sin, blocked});
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["rng"] = cpu_rng_state();
    at::NoGradGuard ng;
    UnrecordedForward mark;
    return reinterpret_cast<DecoderLayerImpl*>(layer)->forward(x, cos, sin, blocked);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    const variable_list g = recompute_and_backward({s[0]}, ctx->saved_data["rng"].toTensor(), grads,
                                                   [&](const variable_list& in) -> variable_list {
                                                     return {layer->forward(in[0], s[1], s[2], s[3])};
                                                   });
    return {g[0], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct CheckpointedSharedLayer : public torch::autograd::Function<CheckpointedSharedLayer> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& xp, const at::Tensor& xs, const at::Tensor& cp,
                               const at::Tensor& sp, const at::Tensor& cs, const at::Tensor& ss,
                               const at::Tensor& blocked_p, const at::Tensor& blocked_s, int64_t layer) {
    ctx->save_for_backward({xp, xs, cp, sp, cs, ss, blocked_p, blocked_s});
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["rng"] = cpu_rng_state();
    at::NoGradGuard ng;
    UnrecordedForward mark;
    auto [hp, hs] = reinterpret_cast<DecoderLayerImpl*>(layer)->forward_shared(xp, xs, Rope{cp, sp}, Rope{cs, ss},
                                                                                blocked_p, blocked_s);
    return {hp, hs};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    const variable_list g = recompute_and_backward({s[0], s[1]}, ctx->saved_data["rng"].toTensor(), grads,
                                                   [&](const variable_list& in) -> variable_list {
                                                     auto [hp, hs] = layer->forward_shared(
                                                         in[0], in[1], Rope{s[2], s[3]}, Rope{s[4], s[5]}, s[6], s[7]);
                                                     return {hp, hs};
                                                   });
    return {g[0], g[1], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

int64_t layer_handle(const std::shared_ptr<DecoderLayerImpl>& l) { return reinterpret_cast<int64_t>(l.get()); }

}  // namespace

struct TransformerImpl::Impl {
  std::shared_ptr<BodyImpl> body;
  std::optional<LoraOptions> lora;                                // set by add_lora
  bool checkpoint_layers = false;                                 // set_gradient_checkpointing
  std::vector<std::pair<std::string, std::shared_ptr<LinearImpl>>> adapted;  // "model.layers.N.<...>.q_proj", in order
  std::mutex rope_mu;           // guards the RoPE tables of forward_cached
  at::Tensor rope_cos, rope_sin;  // [P,hd] fp32, grown on demand
  std::shared_ptr<LinearImpl> lm_head;  // null when tied to embed_tokens
  // LoRA's modules_to_save: frozen copies of the original embedding / head, which the
  // base (a thread inside BaseOnly) reads instead of the trained ones. Undefined else.
  at::Tensor embed_base, head_base;

  const at::Tensor& embed_weight() const {
    return embed_base.defined() && !adapters_active() ? embed_base : body->embed_tokens->weight;
  }
  const at::Tensor& head_weight() const {
    if (!lm_head) return embed_weight();
    return head_base.defined() && !adapters_active() ? head_base : lm_head->weight;
  }
  at::Tensor embed(const at::Tensor& ids) const { return at::embedding(embed_weight(), ids); }

  // positions: [B,T] int64 -> cos, sin: [B,1,T,hd] in `dtype` (HF: fp32 angles, then cast).
  std::pair<at::Tensor, at::Tensor> rope(const ModelConfig& c, const at::Tensor& positions, at::ScalarType dtype) const {
    const auto fopts = at::TensorOptions().dtype(at::kFloat).device(positions.device());
    at::Tensor exponent = at::arange(0, c.head_dim, 2, fopts.dtype(at::kLong)).to(at::kFloat) / c.head_dim;
    at::Tensor inv_freq = at::pow(c.rope_theta, exponent).reciprocal();          // [hd/2]
    at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;       // [B,T,hd/2]
    at::Tensor emb = at::cat({freqs, freqs}, /*dim=*/-1);                       // [B,T,hd]
    return {emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)};
  }

  // Layer checkpointing applies while recording gradients.
  bool checkpointing() const { return checkpoint_layers && at::GradMode::is_enabled(); }

  // x: [B,T,H] through all layers (not the final norm); allowed: [B|1,T,S] bool.
  at::Tensor layers(const ModelConfig& c, at::Tensor x, const at::Tensor& positions, const at::Tensor& allowed) const {
    auto [cos, sin] = rope(c, positions, x.scalar_type());
    const at::Tensor blocked = allowed.logical_not().unsqueeze(1).unsqueeze(1);  // [B|1,1,1,T,S]
    const bool ck = checkpointing();
    // A checkpointed layer's parameters get gradients only if its input requires one (a
    // frozen embedding's output does not, under LoRA): make it a leaf that does.
    if (ck && !x.requires_grad()) x = x.detach().requires_grad_(true);
    for (size_t i = 0; i < body->layer_ptrs.size(); ++i)
      x = ck ? CheckpointedLayer::apply(x, cos, sin, blocked, layer_handle(body->layer_ptrs[i]))
             : body->layer_ptrs[i]->forward(x, cos, sin, blocked);
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
                                          const at::Tensor& segment_ids, const at::Tensor& prefix_ids,
                                          const at::Tensor& attn_mask) {
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
  if (attn_mask.defined()) {
    AGENTR1_CHECK(!shared && positions.defined(), "Transformer::forward: attn_mask needs explicit positions and no "
                                                  "prefix_ids");
    AGENTR1_CHECK(attn_mask.scalar_type() == at::kBool && attn_mask.dim() == 3 && attn_mask.size(1) == T &&
                      attn_mask.size(2) == T && (attn_mask.size(0) == B || attn_mask.size(0) == 1),
                  "Transformer::forward: attn_mask must be [B|1,T,T] bool, got " << attn_mask.sizes() << " "
                                                                                 << attn_mask.scalar_type());
    allowed = attn_mask;
  }
  at::Tensor x = impl_->embed(ids);
  if (!shared) {
    x = impl_->layers(cfg_, x, pos, allowed);
    return impl_->body->norm->forward(x);
  }
  // Shared prefix: computed once ([1,P]); every row's tokens see all of it.
  at::Tensor xp = impl_->embed(prefix_ids.unsqueeze(0));  // [1,P,H]
  at::Tensor pos_p = at::arange(P, lopts).unsqueeze(0);
  const at::Tensor allowed_p = at::ones({P, P}, bopts).tril().unsqueeze(0);     // [1,P,P]
  at::Tensor allowed_s = at::cat({at::ones({allowed.size(0), T, P}, bopts), allowed}, /*dim=*/2);  // [B|1,T,P+T]
  auto [cp, sp] = impl_->rope(cfg_, pos_p, x.scalar_type());
  auto [cs, ss] = impl_->rope(cfg_, pos, x.scalar_type());
  const Rope rp{cp, sp}, rs{cs, ss};
  const at::Tensor blocked_p = allowed_p.logical_not().unsqueeze(1).unsqueeze(1);
  const at::Tensor blocked_s = allowed_s.logical_not().unsqueeze(1).unsqueeze(1);
  const bool ck = impl_->checkpointing();
  if (ck && !x.requires_grad()) x = x.detach().requires_grad_(true);  // see Impl::layers
  if (ck && !xp.requires_grad()) xp = xp.detach().requires_grad_(true);
  for (const auto& layer : impl_->body->layer_ptrs) {
    if (ck) {
      const variable_list o = CheckpointedSharedLayer::apply(xp, x, cp, sp, cs, ss, blocked_p, blocked_s, layer_handle(layer));
      xp = o[0];
      x = o[1];
    } else {
      std::tie(xp, x) = layer->forward_shared(xp, x, rp, rs, blocked_p, blocked_s);
    }
  }
  return impl_->body->norm->forward(x);
}

at::Tensor TransformerImpl::hidden_states_tree(const at::Tensor& ids, const at::Tensor& positions,
                                               const at::Tensor& paths, const at::Tensor& own,
                                               const at::Tensor& own_mask) {
  AGENTR1_CHECK(ids.dim() == 1 && positions.sizes() == ids.sizes() && paths.dim() == 2 && own.dim() == 2 &&
                    own_mask.dim() == 3 && own_mask.size(0) == paths.size(0) && own_mask.size(1) == own.size(1) &&
                    own_mask.size(2) == paths.size(1) && own.size(0) == paths.size(0),
                "Transformer::hidden_states_tree: inconsistent shapes: ids " << ids.sizes() << ", positions "
                    << positions.sizes() << ", paths " << paths.sizes() << ", own " << own.sizes() << ", own_mask "
                    << own_mask.sizes());
  const int64_t N = ids.size(0), B = paths.size(0), L = paths.size(1), Q = own.size(1);
  at::Tensor x = impl_->embed(ids.unsqueeze(0))[0];  // [N,H]
  const int64_t H = x.size(1);
  auto [cos, sin] = impl_->rope(cfg_, positions.unsqueeze(0), x.scalar_type());  // [1,1,N,hd]
  const at::Tensor path_flat = paths.reshape({-1}), own_flat = own.reshape({-1});
  const at::Tensor blocked = own_mask.logical_not().unsqueeze(1).unsqueeze(1);  // [B,1,1,Q,L]
  for (const auto& layer : impl_->body->layer_ptrs) {
    AttentionImpl& a = *layer->self_attn;
    auto [q, k, v] = a.qkv(layer->input_layernorm->forward(x.unsqueeze(0)), cos, sin);  // [1,heads,N,hd]
    const at::Tensor kr = k[0].transpose(0, 1).index_select(0, path_flat).view({B, L, a.n_kv, a.head_dim}).transpose(1, 2);
    const at::Tensor vr = v[0].transpose(0, 1).index_select(0, path_flat).view({B, L, a.n_kv, a.head_dim}).transpose(1, 2);
    const at::Tensor qn = at::cat({q[0].transpose(0, 1).reshape({N, a.n_heads * a.head_dim}),
                                   at::zeros({1, a.n_heads * a.head_dim}, q.options())});  // + a padding row
    const at::Tensor qr =
        qn.index_select(0, own_flat).view({B, Q, a.n_heads, a.head_dim}).transpose(1, 2).contiguous();
    const at::Tensor o = a.attend(qr, kr, vr, blocked).reshape({B * Q, H});  // o_proj applied
    // Each node is owned by exactly one row: summing scatters every output once (the
    // padding row N collects the padding queries and is dropped).
    const at::Tensor scattered = at::zeros({N + 1, H}, o.options()).index_add(0, own_flat, o).narrow(0, 0, N);
    const at::Tensor h = x + scattered;
    x = h + layer->mlp->forward(layer->post_attention_layernorm->forward(h));
  }
  return impl_->body->norm->forward(x);
}

at::Tensor TransformerImpl::logits_from_hidden(const at::Tensor& hidden) {
  return at::linear(hidden, impl_->head_weight()).to(at::kFloat);
}

void TransformerImpl::add_lora(const LoraOptions& opts, uint64_t seed) {
  opts.validate();
  AGENTR1_CHECK(opts.enabled(), "add_lora: rank must be > 0 (rank 0 means no adapters)");
  AGENTR1_CHECK(!impl_->lora, "add_lora: the model already has LoRA adapters");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  for (auto& p : parameters()) p.requires_grad_(false);  // the base is frozen
  const auto& layers = impl_->body->layer_ptrs;
  for (size_t l = 0; l < layers.size(); ++l) {
    AttentionImpl& a = *layers[l]->self_attn;
    MLPImpl& m = *layers[l]->mlp;
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    // PEFT's order (q k v o gate up down), so A is drawn the same way for any target set.
    const std::vector<std::pair<std::string, std::shared_ptr<LinearImpl>>> projs{
        {"self_attn.q_proj", a.q_proj}, {"self_attn.k_proj", a.k_proj}, {"self_attn.v_proj", a.v_proj},
        {"self_attn.o_proj", a.o_proj}, {"mlp.gate_proj", m.gate_proj},   {"mlp.up_proj", m.up_proj},
        {"mlp.down_proj", m.down_proj}};
    for (const auto& [name, lin] : projs) {
      if (!opts.targets(name.substr(name.find('.') + 1))) continue;
      lin->add_adapter(opts.rank, opts.scaling(), opts.dropout, gen);
      impl_->adapted.emplace_back(pre + name, lin);
    }
  }
  for (const auto& m : opts.modules_to_save) {
    if (m == "embed_tokens") {
      at::Tensor& w = impl_->body->embed_tokens->weight;
      impl_->embed_base = w.detach().clone();
      w.requires_grad_(true);
    } else {
      AGENTR1_CHECK(impl_->lm_head != nullptr, "add_lora: modules_to_save lists lm_head but this model's head is "
                                               "tied to embed_tokens; HINT: list embed_tokens (it trains both)");
      impl_->head_base = impl_->lm_head->weight.detach().clone();
      impl_->lm_head->weight.requires_grad_(true);
    }
  }
  impl_->lora = opts;
}

void TransformerImpl::set_gradient_checkpointing(bool on) { impl_->checkpoint_layers = on; }

void TransformerImpl::set_attention_block(int64_t tokens) {
  AGENTR1_CHECK(tokens >= 0, "attention block must be >= 0 tokens (0 = dense attention), got " << tokens);
  for (const auto& l : impl_->body->layer_ptrs) l->self_attn->attention_block = tokens;
}

int64_t TransformerImpl::attention_block() const {
  return impl_->body->layer_ptrs.empty() ? kDefaultAttentionBlock : impl_->body->layer_ptrs[0]->self_attn->attention_block;
}

bool TransformerImpl::gradient_checkpointing() const { return impl_->checkpoint_layers; }

const at::Tensor& TransformerImpl::lm_head_weight() const {
  return impl_->head_weight();
}

const LoraOptions* TransformerImpl::lora() const { return impl_->lora ? &*impl_->lora : nullptr; }

std::vector<std::pair<std::string, at::Tensor>> TransformerImpl::lora_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, lin] : impl_->adapted) {
    out.emplace_back(name + ".lora_A", lin->lora_A);
    out.emplace_back(name + ".lora_B", lin->lora_B);
  }
  if (impl_->embed_base.defined()) out.emplace_back("model.embed_tokens", impl_->body->embed_tokens->weight);
  if (impl_->head_base.defined()) out.emplace_back("lm_head", impl_->lm_head->weight);
  return out;
}

std::vector<at::Tensor> TransformerImpl::trainable_parameters() {
  std::vector<at::Tensor> out;
  for (auto& p : parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

at::Tensor TransformerImpl::lora_delta(const std::string& weight_name) const {
  for (const auto& [name, lin] : impl_->adapted)
    if (weight_name == name + ".weight") return lin->delta();
  return {};
}

at::Tensor TransformerImpl::forward(const at::Tensor& ids, const at::Tensor& positions,
                                    const at::Tensor& segment_ids, const at::Tensor& prefix_ids,
                                    const at::Tensor& attn_mask) {
  return logits_from_hidden(hidden_states(ids, positions, segment_ids, prefix_ids, attn_mask));
}

namespace {

// x [N,in] W^T (+ b) for the cached forward. Decoding a few rows is bound by reading the
// weights, and BLAS gemm packs (copies) the whole weight matrix on every call: for up
// to 4 rows a matrix-vector product per row reads it once, unpacked (measured on the
// ~4M-parameter bench model at batch 1, one thread: 3.1 ms -> 1.3 ms per token). With a
// pool, the output features (up to 4 rows) or the rows (more) are split across its
// threads.
at::Tensor linear_rows(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, SpinPool* pool) {
  const int64_t n = x.size(0), out_features = w.size(0);
  const bool split = pool != nullptr && pool->threads() > 1;
  if (n > 4 && !split) return at::linear(x, w, b);
  at::Tensor out = at::empty({n, out_features}, x.options());
  if (n > 4) {
    const at::Tensor wt = w.t();
    pool->parallel_for(n, [&](int64_t r0, int64_t r1) {
      at::Tensor o = out.narrow(0, r0, r1 - r0);
      if (b.defined())
        at::addmm_out(o, b, x.narrow(0, r0, r1 - r0), wt);
      else
        at::mm_out(o, x.narrow(0, r0, r1 - r0), wt);
    });
    return out;
  }
  auto part = [&](int64_t lo, int64_t hi) {
    const at::Tensor wp = w.narrow(0, lo, hi - lo);
    for (int64_t r = 0; r < n; ++r) {
      at::Tensor o = out[r].narrow(0, lo, hi - lo);
      if (b.defined())
        at::addmv_out(o, b.narrow(0, lo, hi - lo), wp, x[r]);
      else
        at::mv_out(o, wp, x[r]);
    }
  };
  if (split && out_features >= 64)
    pool->parallel_for(out_features, part);
  else
    part(0, out_features);
  return out;
}

// Validates rows against the cache and lays out where each new token goes.
detail::PagedLayout paged_layout(const ModelConfig& cfg, const at::Tensor& ids, const std::vector<CachedRow>& rows,
                                 const KVCache& cache) {
  AGENTR1_CHECK(ids.dim() == 1 && ids.scalar_type() == at::kLong,
                "forward_cached: ids must be [N] int64 (the rows' new tokens concatenated), got " << ids.sizes() << " "
                                                                                                  << ids.scalar_type());
  AGENTR1_CHECK(!rows.empty(), "forward_cached: no rows");
  AGENTR1_CHECK(cache.num_layers() == cfg.num_hidden_layers,
                "forward_cached: cache has " << cache.num_layers() << " layers, model has " << cfg.num_hidden_layers);
  detail::PagedLayout L;
  L.block_size = cache.block_size();
  const int64_t bs = cache.block_size();
  std::set<int32_t> written;
  int64_t n = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    const CachedRow& r = rows[b];
    AGENTR1_CHECK(r.blocks != nullptr, "forward_cached: rows[" << b << "] has no block table");
    AGENTR1_CHECK(r.n_new >= 1 && r.start >= 0,
                  "forward_cached: rows[" << b << "] needs n_new >= 1 and start >= 0, got n_new " << r.n_new
                                          << ", start " << r.start);
    const int64_t end = r.start + r.n_new;
    AGENTR1_CHECK(end <= cfg.max_position_embeddings,
                  "forward_cached: rows[" << b << "] reaches position " << end - 1
                                          << ", beyond the model's max_position_embeddings ("
                                          << cfg.max_position_embeddings << ")");
    const int64_t have = static_cast<int64_t>(r.blocks->size());
    AGENTR1_CHECK(have * bs >= end, "forward_cached: rows[" << b << "] has " << have << " blocks of " << bs
                                                            << " positions but writes up to position " << end - 1);
    for (int64_t i = 0; i < (end + bs - 1) / bs; ++i) {
      const int32_t blk = (*r.blocks)[static_cast<size_t>(i)];
      AGENTR1_CHECK(blk >= 0 && blk < cache.n_blocks(), "forward_cached: rows[" << b << "] block " << blk
                                                                                << " out of range [0, "
                                                                                << cache.n_blocks() << ")");
      if (i >= r.start / bs)
        AGENTR1_CHECK(written.insert(blk).second,
                      "forward_cached: block " << blk << " is written by two rows (rows[" << b
                                               << "] and an earlier one); a block being written must be private");
    }
    L.blocks.push_back(r.blocks);
    for (int64_t t = 0; t < r.n_new; ++t) {
      L.pos.push_back(r.start + t);
      L.row.push_back(static_cast<int32_t>(b));
      L.total_keys += r.start + t + 1;
    }
    L.max_pos = std::max(L.max_pos, end);
    n += r.n_new;
  }
  AGENTR1_CHECK(ids.size(0) == n, "forward_cached: ids has " << ids.size(0) << " tokens but the rows add " << n);
  return L;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> TransformerImpl::rope_table(int64_t n) {
  std::lock_guard<std::mutex> lk(impl_->rope_mu);
  if (!impl_->rope_cos.defined() || impl_->rope_cos.size(0) < n) {
    const int64_t len = std::max<int64_t>(n, impl_->rope_cos.defined() ? 2 * impl_->rope_cos.size(0) : 256);
    // The angles as the tensor path forms them (fp32 inv_freq, position x inv_freq in
    // fp32), their cos/sin by the scalar libm routines element by element: a position's
    // entry is then the same whatever length the table had when it was filled (a
    // vectorised cos may round the tail of a chunk differently), which batch-invariant
    // decoding relies on.
    const int64_t hd = cfg_.head_dim, half = hd / 2;
    const at::Tensor exponent = at::arange(0, hd, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / hd;
    const at::Tensor inv_freq = at::pow(cfg_.rope_theta, exponent).reciprocal().contiguous();  // [hd/2]
    const float* inv = inv_freq.data_ptr<float>();
    at::Tensor c = at::empty({len, hd}, at::TensorOptions().dtype(at::kFloat));
    at::Tensor sn = at::empty({len, hd}, at::TensorOptions().dtype(at::kFloat));
    float* cp = c.data_ptr<float>();
    float* sp = sn.data_ptr<float>();
    for (int64_t p = 0; p < len; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const float a = static_cast<float>(p) * inv[i];
        cp[p * hd + i] = cp[p * hd + half + i] = std::cos(a);
        sp[p * hd + i] = sp[p * hd + half + i] = std::sin(a);
      }
    impl_->rope_cos = c;
    impl_->rope_sin = sn;
  }
  return {impl_->rope_cos, impl_->rope_sin};
}

std::vector<at::Tensor> TransformerImpl::decode_weights() const {
  std::vector<at::Tensor> out;
  for (const auto& layer : impl_->body->layer_ptrs) {
    const AttentionImpl& a = *layer->self_attn;
    const MLPImpl& mlp = *layer->mlp;
    for (const LinearImpl* p : {a.q_proj.get(), a.k_proj.get(), a.v_proj.get(), a.o_proj.get(),
                                mlp.gate_proj.get(), mlp.up_proj.get(), mlp.down_proj.get()})
      out.push_back(p->weight);
  }
  out.push_back(impl_->head_weight());
  return out;
}

at::Tensor TransformerImpl::forward_cached(const at::Tensor& ids, const std::vector<CachedRow>& rows, KVCache& cache,
                                           SpinPool* pool, const DecodeLayout* packed) {
  at::NoGradGuard no_grad;  // inference only: cache writes must not record autograd history
  const detail::PagedLayout L = paged_layout(cfg_, ids, rows, cache);
  const at::Tensor& w = impl_->body->embed_tokens->weight;
  AGENTR1_CHECK(cache.k(0).scalar_type() == w.scalar_type() && cache.k(0).device() == w.device(),
                "forward_cached: cache is " << cache.k(0).scalar_type() << " on " << cache.k(0).device()
                                            << " but the model is " << w.scalar_type() << " on " << w.device()
                                            << "; create the KVCache with the model's dtype and device");
  AGENTR1_CHECK(ids.device() == w.device(), "forward_cached: ids are on " << ids.device() << ", the model on "
                                                                          << w.device());
  const int64_t B = static_cast<int64_t>(rows.size()), N = ids.size(0);
  const at::Device dev = ids.device();
  const auto lopts = at::TensorOptions().dtype(at::kLong);
  std::vector<int64_t> last(static_cast<size_t>(B));
  for (int64_t b = 0, off = 0; b < B; ++b) {
    off += rows[b].n_new;
    last[b] = off - 1;
  }
  at::Tensor x = impl_->embed(ids);  // [N,H]
  const double eps = cfg_.rms_norm_eps;
  const auto& layers = impl_->body->layer_ptrs;

  AGENTR1_CHECK(!cache.batch_invariant || (cache.fused_attention && dev.is_cpu()),
                "forward_cached: batch_invariant needs the fused CPU kernels (a CPU cache with fused_attention), got "
                    << (dev.is_cpu() ? "fused_attention false" : "a cache on " + dev.str()));
  if (cache.fused_attention && dev.is_cpu()) {
    // The products: BLAS by default; row_linear's fixed per-element order when invariant.
    const bool inv = cache.batch_invariant;
    // One-row products read the weights' copies in the decode layout where `packed` has
    // them current (the same bits).
    auto copy_of = [&](const at::Tensor& wt) -> const detail::PackedWeight* {
      return packed != nullptr ? packed->find(wt) : nullptr;
    };
    auto lin = [&](const at::Tensor& in, const at::Tensor& wt, const at::Tensor& bias) {
      return inv ? detail::row_linear(in, wt, bias, pool, copy_of(wt)) : linear_rows(in, wt, bias, pool);
    };
    // A projection with its LoRA adapter applied beside the base product (no merged
    // copy): y = x W^T + b + ((x A^T) B^T) * scaling, as LinearImpl::forward computes it.
    auto proj = [&](const at::Tensor& in, const LinearImpl& p) {
      at::Tensor y = lin(in, p.weight, p.bias);
      if (p.adapted())
        y.add_(lin(lin(in.to(p.lora_A.scalar_type()), p.lora_A, {}), p.lora_B, {}).mul_(p.lora_scaling).to(y.scalar_type()));
      return y;
    };
    // Products of one input (q/k/v, gate/up): with the invariant kernels and no adapter
    // on them, one parallel region for all (row_linear_many: the same bits, one thread
    // hand-off instead of three or two per layer).
    auto projs = [&](const at::Tensor& in, std::initializer_list<const LinearImpl*> ps) {
      std::vector<at::Tensor> out;
      bool fuse = inv;
      for (const LinearImpl* p : ps) fuse = fuse && !p->adapted();
      if (fuse) {
        std::vector<at::Tensor> ws, bs;
        std::vector<const detail::PackedWeight*> copies;
        for (const LinearImpl* p : ps) {
          ws.push_back(p->weight);
          bs.push_back(p->bias);
          copies.push_back(copy_of(p->weight));
        }
        return detail::row_linear_many(in, ws, bs, pool, copies);
      }
      for (const LinearImpl* p : ps) out.push_back(proj(in, *p));
      return out;
    };
    auto [cos, sin] = rope_table(L.max_pos);
    for (size_t l = 0; l < layers.size(); ++l) {
      DecoderLayerImpl& layer = *layers[l];
      AttentionImpl& a = *layer.self_attn;
      at::Tensor h = detail::rms_norm_rows(x, layer.input_layernorm->weight, eps);
      const std::vector<at::Tensor> qkv = projs(h, {a.q_proj.get(), a.k_proj.get(), a.v_proj.get()});
      const at::Tensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
      at::Tensor o = detail::paged_attention(q, k, v, a.q_norm ? a.q_norm->weight : at::Tensor(),
                                             a.k_norm ? a.k_norm->weight : at::Tensor(), eps, cos, sin,
                                             cache.k(static_cast<int64_t>(l)), cache.v(static_cast<int64_t>(l)), L,
                                             a.n_heads, a.n_kv, a.head_dim, pool);
      x = x + proj(o, *a.o_proj);
      MLPImpl& mlp = *layer.mlp;
      h = detail::rms_norm_rows(x, layer.post_attention_layernorm->weight, eps);
      std::vector<at::Tensor> gu = projs(h, {mlp.gate_proj.get(), mlp.up_proj.get()});
      at::Tensor& g = gu[0];
      if (inv)
        detail::silu_mul_rows_(g, gu[1], pool);
      else
        at::silu_(g).mul_(gu[1]);
      x = x + proj(g, *mlp.down_proj);
    }
    at::Tensor hl = x.index_select(0, at::from_blob(last.data(), {B}, lopts).clone());  // [B,H]
    const at::Tensor& head = impl_->head_weight();
    return lin(detail::rms_norm_rows(hl, impl_->body->norm->weight, eps), head, {}).to(at::kFloat);
  }

  // Portable tensor path: gather each row's blocks, attend with a [B,T,S] mask.
  const int64_t bs = cache.block_size(), H = x.size(1);
  int64_t t_max = 0, span = 0;
  for (const auto& r : rows) {
    t_max = std::max(t_max, r.n_new);
    span = std::max(span, r.start + r.n_new);
  }
  std::vector<int64_t> dest(static_cast<size_t>(N)), gather(static_cast<size_t>(B * span), 0),
      pad(static_cast<size_t>(B * t_max), N), valid(static_cast<size_t>(N));
  std::vector<uint8_t> allowed(static_cast<size_t>(B * t_max * span), 0);
  for (int64_t b = 0, off = 0; b < B; ++b) {
    const CachedRow& r = rows[b];
    const auto& tb = *r.blocks;
    for (int64_t j = 0; j < r.start + r.n_new; ++j) gather[b * span + j] = tb[j / bs] * bs + j % bs;
    for (int64_t t = 0; t < t_max; ++t) {
      const int64_t see = t < r.n_new ? r.start + t : 0;  // padding queries see key 0 (no NaN)
      for (int64_t j = 0; j <= see; ++j) allowed[(b * t_max + t) * span + j] = 1;
    }
    for (int64_t t = 0; t < r.n_new; ++t, ++off) {
      dest[off] = gather[b * span + r.start + t];
      pad[b * t_max + t] = off;
      valid[off] = b * t_max + t;
    }
  }
  auto to_dev = [&](std::vector<int64_t>& v) {
    return at::from_blob(v.data(), {static_cast<int64_t>(v.size())}, lopts).to(dev, false, /*copy=*/true);
  };
  const at::Tensor dest_t = to_dev(dest), gather_t = to_dev(gather), pad_t = to_dev(pad), valid_t = to_dev(valid);
  const at::Tensor blocked =
      at::from_blob(allowed.data(), {B, 1, 1, t_max, span}, at::TensorOptions().dtype(at::kByte))
          .to(dev, at::kBool, false, true)
          .logical_not();
  std::vector<int64_t> pos_v(L.pos.begin(), L.pos.end());
  auto [cos, sin] = impl_->rope(cfg_, to_dev(pos_v).unsqueeze(0), x.scalar_type());  // [1,1,N,hd]
  for (size_t l = 0; l < layers.size(); ++l) {
    DecoderLayerImpl& layer = *layers[l];
    AttentionImpl& a = *layer.self_attn;
    auto [q, k, v] = a.qkv(layer.input_layernorm->forward(x.unsqueeze(0)), cos, sin);  // [1,heads,N,hd]
    at::Tensor kflat = cache.k(static_cast<int64_t>(l)).view({-1, a.n_kv, a.head_dim});
    at::Tensor vflat = cache.v(static_cast<int64_t>(l)).view({-1, a.n_kv, a.head_dim});
    kflat.index_copy_(0, dest_t, k[0].transpose(0, 1));
    vflat.index_copy_(0, dest_t, v[0].transpose(0, 1));
    at::Tensor kr = kflat.index_select(0, gather_t).view({B, span, a.n_kv, a.head_dim}).transpose(1, 2);
    at::Tensor vr = vflat.index_select(0, gather_t).view({B, span, a.n_kv, a.head_dim}).transpose(1, 2);
    at::Tensor qflat = at::cat({q[0].transpose(0, 1).reshape({N, a.n_heads * a.head_dim}),
                                at::zeros({1, a.n_heads * a.head_dim}, q.options())});
    at::Tensor qp = qflat.index_select(0, pad_t).view({B, t_max, a.n_heads, a.head_dim}).transpose(1, 2).contiguous();
    at::Tensor o = a.attend(qp, kr, vr, blocked).reshape({B * t_max, H}).index_select(0, valid_t);  // [N,H]
    at::Tensor hres = x + o;
    x = hres + layer.mlp->forward(layer.post_attention_layernorm->forward(hres));
  }
  at::Tensor hl = x.index_select(0, to_dev(last));
  return logits_from_hidden(impl_->body->norm->forward(hl));
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
