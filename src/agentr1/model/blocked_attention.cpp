#include "agentr1/model/blocked_attention.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1::model::detail {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kInf = std::numeric_limits<double>::infinity();

// One tile of queries [t0, t0+bq) x keys [s0, s0+bk) and what its mask says.
struct Tile {
  int64_t s0, bk;
  bool masked;  // some pairs blocked: fill them with -inf (else none is)
};

// The tiles of the key axis that query tile [t0, t0+bq) must visit: those where at least
// one (query, key) pair in one row of the batch is allowed. mask: [Bm,T,S] bool, true
// where blocked.
std::vector<Tile> key_tiles(const at::Tensor& mask, int64_t t0, int64_t bq, int64_t S, int64_t block) {
  std::vector<Tile> tiles;
  const at::Tensor rows = mask.narrow(1, t0, bq);
  for (int64_t s0 = 0; s0 < S; s0 += block) {
    const int64_t bk = std::min(block, S - s0);
    const at::Tensor m = rows.narrow(2, s0, bk);
    if (m.all().item<bool>()) continue;  // nothing to see here
    tiles.push_back({s0, bk, m.any().item<bool>()});
  }
  return tiles;
}

// Scores of query tile qb [B,nKV,R*bq,hd] against key tile kb [B,nKV,bk,hd], scaled, with
// blocked pairs at -inf: [B,nKV,R*bq,bk] fp32.
at::Tensor tile_scores(const at::Tensor& qb, const at::Tensor& kb, const at::Tensor& mask, int64_t t0, int64_t bq,
                       const Tile& t, int64_t R, double scale) {
  at::Tensor s = at::matmul(qb, kb.transpose(-1, -2)).mul_(scale);
  if (t.masked) {
    const at::Tensor m = mask.narrow(1, t0, bq).narrow(2, t.s0, t.bk);  // [Bm,bq,bk]
    s.view({s.size(0), s.size(1), R, bq, t.bk}).masked_fill_(m.unsqueeze(1).unsqueeze(1), -kInf);
  }
  return s;
}

// [B,nKV,R,T,hd] -> rows [t0, t0+bq) as [B,nKV,R*bq,hd] (a copy).
at::Tensor query_rows(const at::Tensor& x, int64_t t0, int64_t bq) {
  const int64_t B = x.size(0), G = x.size(1), R = x.size(2), hd = x.size(4);
  return x.narrow(3, t0, bq).reshape({B, G, R * bq, hd});
}

struct BlockedAttention : public torch::autograd::Function<BlockedAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& blocked, double scale, int64_t block) {
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3);
    const int64_t G = k.size(1), S = k.size(2), R = H / G;
    const at::Tensor mask = blocked.reshape({blocked.size(0), T, S});
    const at::Tensor qf = q.to(at::kFloat).reshape({B, G, R, T, hd});
    const at::Tensor kf = k.to(at::kFloat).contiguous(), vf = v.to(at::kFloat).contiguous();
    const auto fopts = qf.options();
    at::Tensor out = at::zeros({B, G, R, T, hd}, fopts);
    at::Tensor lse = at::full({B, G, R, T}, -kInf, fopts);
    for (int64_t t0 = 0; t0 < T; t0 += block) {
      const int64_t bq = std::min(block, T - t0);
      const at::Tensor qb = query_rows(qf, t0, bq);
      at::Tensor m = at::full({B, G, R * bq}, -kInf, fopts);
      at::Tensor l = at::zeros({B, G, R * bq}, fopts);
      at::Tensor acc = at::zeros({B, G, R * bq, hd}, fopts);
      for (const Tile& t : key_tiles(mask, t0, bq, S, block)) {
        const at::Tensor s = tile_scores(qb, kf.narrow(2, t.s0, t.bk), mask, t0, bq, t, R, scale);
        const at::Tensor m_new = at::maximum(m, std::get<0>(s.max(-1)));
        // A query with no visible key so far keeps m = -inf: shift by 0 instead (its
        // scores are all -inf, so p = 0 and its sums stay 0).
        const at::Tensor shift = m_new.masked_fill(m_new == -kInf, 0.0);
        const at::Tensor p = (s - shift.unsqueeze(-1)).exp_();
        const at::Tensor rescale = (m - shift).exp_();  // exp(-inf) = 0 for an empty start
        l = l.mul_(rescale).add_(p.sum(-1));
        acc = acc.mul_(rescale.unsqueeze(-1)).add_(at::matmul(p, vf.narrow(2, t.s0, t.bk)));
        m = m_new;
      }
      const at::Tensor empty = l == 0;  // a query that sees no key: output 0
      out.narrow(3, t0, bq).copy_(acc.div_(l.masked_fill(empty, 1.0).unsqueeze(-1)).view({B, G, R, bq, hd}));
      lse.narrow(3, t0, bq).copy_((m.masked_fill(empty, 0.0) + l.log()).view({B, G, R, bq}));  // -inf if empty
    }
    ctx->save_for_backward({q, k, v, blocked, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["block"] = block;
    return out.view({B, H, T, hd}).to(q.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &blocked = saved[3], &out = saved[4],
                     &lse = saved[5];
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t block = ctx->saved_data["block"].toInt();
    const int64_t B = q.size(0), H = q.size(1), T = q.size(2), hd = q.size(3);
    const int64_t G = k.size(1), S = k.size(2), R = H / G;
    const at::Tensor mask = blocked.reshape({blocked.size(0), T, S});
    const at::Tensor qf = q.to(at::kFloat).reshape({B, G, R, T, hd});
    const at::Tensor kf = k.to(at::kFloat).contiguous(), vf = v.to(at::kFloat).contiguous();
    const at::Tensor dout = grads[0].to(at::kFloat).reshape({B, G, R, T, hd});
    const at::Tensor D = (dout * out).sum(-1);  // rowsum(dO * O): [B,G,R,T]
    // A query that saw no key has lse = -inf: +inf makes its p = exp(s - inf) = 0.
    const at::Tensor lse_safe = lse.masked_fill(lse == -kInf, kInf);
    at::Tensor dq = at::zeros({B, G, R, T, hd}, qf.options());
    at::Tensor dk = at::zeros({B, G, S, hd}, qf.options()), dv = at::zeros({B, G, S, hd}, qf.options());
    for (int64_t t0 = 0; t0 < T; t0 += block) {
      const int64_t bq = std::min(block, T - t0);
      const at::Tensor qb = query_rows(qf, t0, bq), dob = query_rows(dout, t0, bq);
      const at::Tensor lb = lse_safe.narrow(3, t0, bq).reshape({B, G, R * bq, 1});
      const at::Tensor db = D.narrow(3, t0, bq).reshape({B, G, R * bq, 1});
      at::Tensor dqb = at::zeros({B, G, R * bq, hd}, qf.options());
      for (const Tile& t : key_tiles(mask, t0, bq, S, block)) {
        const at::Tensor kb = kf.narrow(2, t.s0, t.bk), vb = vf.narrow(2, t.s0, t.bk);
        const at::Tensor p = tile_scores(qb, kb, mask, t0, bq, t, R, scale).sub_(lb).exp_();  // [B,G,R*bq,bk]
        dv.narrow(2, t.s0, t.bk).add_(at::matmul(p.transpose(-1, -2), dob));
        const at::Tensor ds = at::matmul(dob, vb.transpose(-1, -2)).sub_(db).mul_(p).mul_(scale);
        dqb.add_(at::matmul(ds, kb));
        dk.narrow(2, t.s0, t.bk).add_(at::matmul(ds.transpose(-1, -2), qb));
      }
      dq.narrow(3, t0, bq).copy_(dqb.view({B, G, R, bq, hd}));
    }
    return {dq.view({B, H, T, hd}).to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor blocked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                             double scale, int64_t block) {
  AGENTR1_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && q.size(0) == k.size(0) &&
                    q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
                "blocked_attention: q must be [B,nH,T,hd] and k, v [B,nKV,S,hd] with nH a multiple of nKV, got q "
                    << q.sizes() << ", k " << k.sizes() << ", v " << v.sizes());
  const int64_t T = q.size(2), S = k.size(2);
  AGENTR1_CHECK(blocked.scalar_type() == at::kBool && blocked.dim() == 5 && blocked.size(3) == T &&
                    blocked.size(4) == S && blocked.size(1) == 1 && blocked.size(2) == 1 &&
                    (blocked.size(0) == 1 || blocked.size(0) == q.size(0)),
                "blocked_attention: blocked must be [B|1,1,1,T,S] bool for T=" << T << ", S=" << S << ", got "
                                                                                << blocked.sizes() << " "
                                                                                << blocked.scalar_type());
  AGENTR1_CHECK(block >= 1, "blocked_attention: block must be >= 1 token, got " << block);
  return BlockedAttention::apply(q, k, v, blocked, scale, block);
}

}  // namespace agentr1::model::detail
