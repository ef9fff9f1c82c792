#!/usr/bin/env python3
"""Independent reference for agentr1's advantage estimators and extra losses.

Run with Debian's python3-torch. Implements the published formulas directly, in the
padded layout verl uses (one row per trajectory; a step's observation tokens sit
between its action tokens with response_mask 0 and random values/rewards that must be
ignored; padding at the end): GRPO, RLOO, REINFORCE++ (+baseline), token-level GAE with
observation tokens skipped, step-level GAE over the steps, the turn_rloo turn-level
estimator, GiGPO (episode and anchor-state groups), masked whitening (unbiased variance), GSPO, REINFORCE, the clipped value
loss, token entropy and the fixed/adaptive KL controllers. Writes inputs and expected
outputs as JSON for estimator_test.cpp.

usage: algo_estimators_ref.py OUT.json
"""
import json
import math
import random
import sys

import torch

torch.manual_seed(4321)
rng = random.Random(4321)
D = torch.float64


# ---------------------------------------------------------------- batches
def make_batch(groups, max_steps=4, max_tokens=5, outcome_only=False):
    trajs = []
    for g in groups:
        n_steps = rng.randint(1, max_steps)
        steps = []
        for _ in range(n_steps):
            n = rng.randint(1, max_tokens)
            steps.append({
                "reward": 0.0 if outcome_only else round(rng.uniform(-1, 1), 3) * (rng.random() < 0.7),
                "n_tokens": n,
                "value": round(rng.uniform(-1, 1), 4),
                "token_values": [round(rng.uniform(-1, 1), 4) for _ in range(n)],
                "token_kl": [round(rng.uniform(-0.2, 0.5), 4) for _ in range(n)],
            })
        trajs.append({"group": g, "outcome_reward": float(rng.choice([0.0, 1.0, 0.5])),
                      "steps": steps})
    return trajs


def pad_layout(trajs, kl_coef):
    """verl-style rows: obs tokens (mask 0, junk values/rewards) before each step's action tokens."""
    rows = []
    for tr in trajs:
        toks = []  # (mask, reward, value, kl, step index)
        for si, st in enumerate(tr["steps"]):
            for _ in range(rng.randint(0, 3)):
                toks.append((0, rng.uniform(-5, 5), rng.uniform(-5, 5), 0.0, -1))
            for k in range(st["n_tokens"]):
                toks.append((1, 0.0, st["token_values"][k], st["token_kl"][k], si))
        rows.append(toks)
    T = max(len(r) for r in rows) + 2
    B = len(rows)
    mask = torch.zeros(B, T, dtype=D)
    score = torch.zeros(B, T, dtype=D)
    values = torch.rand(B, T, dtype=D) * 10 - 5   # junk where mask is 0
    kl = torch.zeros(B, T, dtype=D)
    step_of = torch.full((B, T), -1, dtype=torch.long)
    for b, (tr, toks) in enumerate(zip(trajs, rows)):
        last_of_step = {}
        for t, (m, junk_r, v, k, si) in enumerate(toks):
            mask[b, t] = m
            if m:
                values[b, t] = v
                kl[b, t] = k
                step_of[b, t] = si
                last_of_step[si] = t
            else:
                values[b, t] = v
                score[b, t] = 0.0  # observation tokens carry no reward in verl's layout
        for si, t in last_of_step.items():
            score[b, t] += tr["steps"][si]["reward"]
        score[b, last_of_step[len(tr["steps"]) - 1]] += tr["outcome_reward"]
    rewards = score - kl_coef * kl  # verl apply_kl_penalty: token_level_scores - beta * kl
    return rewards, values, mask, kl, step_of


def unpad(trajs, x, mask, step_of):
    out = []
    for b, tr in enumerate(trajs):
        per = [[] for _ in tr["steps"]]
        for t in range(x.shape[1]):
            if mask[b, t] > 0:
                per[int(step_of[b, t])].append(float(x[b, t]))
        out.append(per)
    return out


def masked_mean(x, m):
    return (x * m).sum() / m.sum()


def masked_whiten(x, m):
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m) * (m.sum() / (m.sum() - 1))
    return (x - mean) * torch.rsqrt(var + 1e-8)


def metrics_of(adv, ret, mask, extra=None):
    sel = mask > 0
    out = {}
    for key, x in (("critic/advantages", adv), ("critic/returns", ret)) + tuple(extra or ()):
        v = x[sel]
        out[key + "/mean"] = v.mean().item()
        out[key + "/max"] = v.max().item()
        out[key + "/min"] = v.min().item()
    return out


def kl_metrics(kl, mask, kl_coef):
    if kl_coef <= 0:
        return {}
    per_seq = (kl * mask).sum(-1) / mask.sum(-1)
    return {"actor/reward_kl_penalty": per_seq.mean().item(),
            "actor/reward_kl_penalty_coeff": kl_coef}


# ---------------------------------------------------------------- estimators (verl formulas)
def group_ids(trajs):
    return [tr["group"] for tr in trajs]


def est_grpo(trajs, o):
    r, v, m, kl, so = pad_layout(trajs, o["kl_coef"])
    scores = r.sum(-1)
    idx = group_ids(trajs)
    adv = torch.zeros_like(scores)
    for i in range(len(trajs)):
        mem = torch.stack([scores[j] for j in range(len(trajs)) if idx[j] == idx[i]])
        mean, std = (torch.tensor(0.0, dtype=D), torch.tensor(1.0, dtype=D)) if len(mem) == 1 \
            else (mem.mean(), mem.std())
        adv[i] = (scores[i] - mean) / (std + o["eps"]) if o["norm_adv_by_std_in_grpo"] \
            else scores[i] - mean
    A = adv.unsqueeze(-1) * m
    return A, A, m, kl, so, []


def est_rloo(trajs, o):
    r, v, m, kl, so = pad_layout(trajs, o["kl_coef"])
    scores = r.sum(-1)
    idx = group_ids(trajs)
    adv = scores.clone()
    for i in range(len(trajs)):
        mem = [scores[j] for j in range(len(trajs)) if idx[j] == idx[i]]
        n = len(mem)
        if n > 1:
            mean = torch.stack(mem).mean()
            adv[i] = scores[i] * n / (n - 1) - mean * n / (n - 1)
    A = adv.unsqueeze(-1) * m
    return A, A, m, kl, so, []


def est_rpp(trajs, o):
    r, v, m, kl, so = pad_layout(trajs, o["kl_coef"])
    ret = torch.zeros_like(r)
    running = torch.zeros(r.shape[0], dtype=D)
    for t in reversed(range(r.shape[1])):
        # carried across observation tokens (mask 0) instead of verl's reset
        running = m[:, t] * (r[:, t] + o["gamma"] * running) + (1 - m[:, t]) * running
        ret[:, t] = running
    A = masked_whiten(ret, m) * m
    return A, ret, m, kl, so, []


def est_rpp_baseline(trajs, o):
    r, v, m, kl, so = pad_layout(trajs, o["kl_coef"])
    scores = r.sum(-1)
    idx = group_ids(trajs)
    c = scores.clone()
    for i in range(len(trajs)):
        mem = [scores[j] for j in range(len(trajs)) if idx[j] == idx[i]]
        mean = torch.stack(mem).mean() if len(mem) > 1 else 0.0
        c[i] = scores[i] - mean
    A = c.unsqueeze(-1).tile([1, r.shape[1]]) * m
    A = masked_whiten(A, m) * m
    return A, A, m, kl, so, []


def verl_gae(rewards, values, mask, gamma, lam):
    nextvalues = 0
    lastgaelam = 0
    rev = []
    for t in reversed(range(rewards.shape[-1])):
        delta = rewards[:, t] + gamma * nextvalues - values[:, t]
        cand = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = cand * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        rev.append(lastgaelam)
    adv = torch.stack(rev[::-1], dim=1)
    return adv, adv + values


def est_token_gae(trajs, o):
    r, v, m, kl, so = pad_layout(trajs, o["kl_coef"])
    adv, ret = verl_gae(r, v, m, o["gamma"], o["lam"])
    if o["whiten_advantages"]:
        adv = masked_whiten(adv, m)
    return adv, ret, m, kl, so, [("critic/values", v)]


def est_step_gae(trajs, o):
    # GAE over steps: [B, S] with per-step rewards and one value per step.
    B = len(trajs)
    S = max(len(tr["steps"]) for tr in trajs) + 1
    rs = torch.zeros(B, S, dtype=D)
    vs = torch.zeros(B, S, dtype=D)
    ms = torch.zeros(B, S, dtype=D)
    for b, tr in enumerate(trajs):
        for t, st in enumerate(tr["steps"]):
            rs[b, t] = st["reward"] - o["kl_coef"] * sum(st["token_kl"])
            vs[b, t] = st["value"]
            ms[b, t] = 1
        rs[b, len(tr["steps"]) - 1] += tr["outcome_reward"]
    adv_s, ret_s = verl_gae(rs, vs, ms, o["gamma"], o["lam"])
    step_white = o["whiten_advantages"] and o["whiten_level"] == "step"
    if step_white:  # StepPO: whiten over the batch's steps, one value each
        adv_s = masked_whiten(adv_s, ms)
    # broadcast to tokens through the padded token layout
    _, _, m, kl, so = pad_layout(trajs, 0.0)
    adv = torch.zeros_like(m)
    ret = torch.zeros_like(m)
    val = torch.zeros_like(m)
    for b in range(B):
        for t in range(m.shape[1]):
            if m[b, t] > 0:
                s = int(so[b, t])
                adv[b, t], ret[b, t], val[b, t] = adv_s[b, s], ret_s[b, s], vs[b, s]
    if o["whiten_advantages"] and not step_white:
        adv = masked_whiten(adv, m)
    return adv, ret, m, kl, so, [("critic/values", val)]


def est_turn_rloo(trajs, o):
    gamma = o["gamma"]
    idx = group_ids(trajs)
    R = []  # per-step rewards and reward-to-go
    for tr in trajs:
        r = [st["reward"] - o["kl_coef"] * sum(st["token_kl"]) for st in tr["steps"]]
        r[-1] += tr["outcome_reward"]
        R.append(r)
    G = [[sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))] for r in R]
    A = [[0.0] * len(g) for g in G]
    for i in range(len(trajs)):
        others = [j for j in range(len(trajs)) if idx[j] == idx[i] and j != i]
        B_i = sum(G[j][0] for j in others) / len(others) if others else 0.0
        for t in range(len(G[i])):
            alive = [G[j][t] for j in others if len(G[j]) > t]
            if alive:
                A[i][t] = G[i][t] - sum(alive) / len(alive)
            else:
                past = sum(gamma ** k * R[i][k] for k in range(t))
                A[i][t] = G[i][t] - (B_i - past) / gamma ** t
    if o["turn_norm_by_std"]:
        for g in set(idx):
            pooled = torch.tensor([x for j in range(len(trajs)) if idx[j] == g for x in G[j]], dtype=D)
            sd = pooled.std().item() if len(pooled) > 1 else 1.0
            for j in range(len(trajs)):
                if idx[j] == g:
                    A[j] = [a / (sd + o["eps"]) for a in A[j]]
    _, _, m, kl, so = pad_layout(trajs, 0.0)
    adv, ret = broadcast_steps(m, so, A, G)
    return adv, ret, m, kl, so, []


def broadcast_steps(m, so, A, G):
    """Per-step advantages A[b][s] and returns G[b][s] onto the padded token layout."""
    adv = torch.zeros_like(m)
    ret = torch.zeros_like(m)
    for b in range(m.shape[0]):
        for t in range(m.shape[1]):
            if m[b, t] > 0:
                s = int(so[b, t])
                adv[b, t], ret[b, t] = A[b][s], G[b][s]
    return adv, ret


def add_anchors(trajs, seed):
    """GiGPO anchor states: "<start>" first, then a few shared states (and unknown "")."""
    r = random.Random(seed)
    for tr in trajs:
        for t, st in enumerate(tr["steps"]):
            st["anchor"] = "<start>" if t == 0 else r.choice(["s1", "s2", "s3", ""])


def est_gigpo(trajs, o):
    """GiGPO (arXiv 2505.10978): episode group advantage + omega * anchor-state step advantage."""
    mean_std = o["gigpo_mode"] == "mean_std_norm"
    r, _, m, kl, so = pad_layout(trajs, o["kl_coef"])
    scores = r.sum(-1)
    idx = group_ids(trajs)
    episode = []
    for i in range(len(trajs)):  # the episode level is GRPO's rule exactly
        mem = torch.stack([scores[j] for j in range(len(trajs)) if idx[j] == idx[i]])
        mean, std = (0.0, 1.0) if len(mem) == 1 else (mem.mean().item(), mem.std().item())
        episode.append((scores[i].item() - mean) / (std + o["eps"]) if mean_std else scores[i].item() - mean)
    G = []  # discounted return from each step
    for tr in trajs:
        rew = [st["reward"] - o["kl_coef"] * sum(st["token_kl"]) for st in tr["steps"]]
        rew[-1] += tr["outcome_reward"]
        G.append([sum(o["gamma"] ** (k - t) * rew[k] for k in range(t, len(rew))) for t in range(len(rew))])
    step_adv = [[0.0] * len(g) for g in G]
    buckets = {}
    for i, tr in enumerate(trajs):
        for t, st in enumerate(tr["steps"]):
            if st["anchor"]:
                buckets.setdefault((idx[i], st["anchor"]), []).append((i, t))
    for mem in buckets.values():
        if len(mem) < 2:
            continue
        vals = torch.tensor([G[i][t] for i, t in mem], dtype=D)
        mean, std = vals.mean().item(), vals.std().item()
        for i, t in mem:
            step_adv[i][t] = (G[i][t] - mean) / (std + o["eps"]) if mean_std else G[i][t] - mean
    A = [[episode[b] + o["gigpo_step_weight"] * a for a in step_adv[b]] for b in range(len(trajs))]
    adv, ret = broadcast_steps(m, so, A, G)
    return adv, ret, m, kl, so, []


ESTIMATORS = {
    "grpo": est_grpo, "rloo": est_rloo, "reinforce_plus_plus": est_rpp,
    "reinforce_plus_plus_baseline": est_rpp_baseline, "gae": est_step_gae,
    "token_gae": est_token_gae, "turn_rloo": est_turn_rloo, "gigpo": est_gigpo,
}

BASE = {"gamma": 1.0, "lam": 1.0, "norm_adv_by_std_in_grpo": True, "eps": 1e-6, "kl_coef": 0.0,
        "whiten_advantages": True, "turn_norm_by_std": False, "gigpo_step_weight": 1.0,
        "gigpo_mode": "mean_std_norm", "whiten_level": "token"}
GROUPS = ["a"] * 3 + ["b"] * 2 + ["c"] + ["d"] * 4 + ["e"] * 2
VARIANTS = {
    "grpo": [{}, {"norm_adv_by_std_in_grpo": False}, {"kl_coef": 0.1}],
    "rloo": [{}, {"kl_coef": 0.05}],
    "reinforce_plus_plus": [{}, {"gamma": 0.9, "kl_coef": 0.1}],
    "reinforce_plus_plus_baseline": [{}, {"kl_coef": 0.1}],
    "gae": [{}, {"gamma": 0.9, "lam": 0.95}, {"gamma": 0.95, "lam": 0.8, "kl_coef": 0.1,
                                               "whiten_advantages": False},
            {"gamma": 0.99, "lam": 0.95, "whiten_level": "step"}],
    "token_gae": [{}, {"gamma": 0.99, "lam": 0.95, "kl_coef": 0.1},
                  {"gamma": 0.9, "lam": 0.7, "whiten_advantages": False}],
    "turn_rloo": [{}, {"gamma": 0.9}, {"gamma": 0.8, "turn_norm_by_std": True, "kl_coef": 0.05}],
    "gigpo": [{"gamma": 0.95}, {"gamma": 0.9, "gigpo_mode": "mean_norm", "gigpo_step_weight": 0.5},
              {"gamma": 1.0, "kl_coef": 0.1, "gigpo_step_weight": 2.0}],
}

cases = {"estimators": [], "gspo": [], "reinforce": [], "value": [], "entropy": [],
         "kl_ctrl": []}
for name, variants in VARIANTS.items():
    for var in variants:
        o = dict(BASE, **var)
        trajs = make_batch(GROUPS)
        if name == "gigpo":
            add_anchors(trajs, len(cases["estimators"]))
        adv, ret, m, kl, so, extra = ESTIMATORS[name](trajs, o)
        met = metrics_of(adv, ret, m, extra)
        met.update(kl_metrics(kl, m, o["kl_coef"]))
        cases["estimators"].append({
            "estimator": name, "options": o, "trajs": trajs,
            "advantages": unpad(trajs, adv, m, so), "returns": unpad(trajs, ret, m, so),
            "metrics": met})

# ---------------------------------------------------------------- losses
B, T = 5, 9


def agg(loss, mask, mode):
    if mode == "token-mean":
        return masked_mean(loss, mask)
    if mode == "seq-mean-token-sum":
        return (loss * mask).sum(-1).mean()
    if mode == "seq-mean-token-mean":
        return ((loss * mask).sum(-1) / mask.sum(-1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (loss * mask).sum(-1).sum() / mask.shape[-1]
    raise ValueError(mode)


def rand_mask():
    mask = (torch.rand(B, T) > 0.3).to(D)
    mask[:, 0] = 1
    return mask


for mode in ("seq-mean-token-mean", "token-mean"):
    for low, high in ((0.2, 0.2), (0.0003, 0.0004)):
        logp = (-torch.rand(B, T, dtype=D) * 3).requires_grad_(True)
        old = logp.detach() + torch.randn(B, T, dtype=D) * 0.05
        adv = torch.randn(B, T, dtype=D)
        mask = rand_mask()
        nk = logp - old
        seq = (nk * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        lr = torch.clamp(logp - logp.detach() + seq.detach().unsqueeze(-1), max=10.0)
        ratio = torch.exp(lr)
        l1 = -adv * ratio
        l2 = -adv * torch.clamp(ratio, 1 - low, 1 + high)
        loss = agg(torch.maximum(l1, l2), mask, mode)
        loss.backward()
        cases["gspo"].append({
            "logp": logp.detach().tolist(), "old": old.tolist(), "adv": adv.tolist(),
            "mask": mask.tolist(), "low": low, "high": high, "mode": mode,
            "loss": loss.item(), "grad": logp.grad.tolist(),
            "pg_clipfrac": masked_mean((l2 > l1).to(D), mask).item(),
            "ppo_kl": masked_mean(-nk.detach(), mask).item()})

for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
    logp = (-torch.rand(B, T, dtype=D) * 3).requires_grad_(True)
    old = logp.detach() + torch.randn(B, T, dtype=D) * 0.1
    adv = torch.randn(B, T, dtype=D)
    mask = rand_mask()
    loss = agg(-adv * logp, mask, mode)
    loss.backward()
    cases["reinforce"].append({
        "logp": logp.detach().tolist(), "old": old.tolist(), "adv": adv.tolist(),
        "mask": mask.tolist(), "mode": mode, "loss": loss.item(), "grad": logp.grad.tolist(),
        "ppo_kl": masked_mean(old - logp.detach(), mask).item()})

    for clip in (0.2, 0.5):
        values = torch.randn(B, T, dtype=D)
        vpreds = (values + torch.randn(B, T, dtype=D) * 0.5).requires_grad_(True)
        returns = values + torch.randn(B, T, dtype=D)
        mask = rand_mask()
        vclip = torch.max(torch.min(vpreds, values + clip), values - clip)
        v1 = (vpreds - returns) ** 2
        v2 = (vclip - returns) ** 2
        loss = 0.5 * agg(torch.max(v1, v2), mask, mode)
        loss.backward()
        cases["value"].append({
            "vpreds": vpreds.detach().tolist(), "returns": returns.tolist(),
            "values": values.tolist(), "mask": mask.tolist(), "clip": clip, "mode": mode,
            "loss": loss.item(), "grad": vpreds.grad.tolist(),
            "clipfrac": masked_mean((v2 > v1).to(D), mask).item(),
            "vpred_mean": masked_mean(vpreds.detach(), mask).item()})

for V in (7, 50):
    logits = torch.randn(3, 4, V, dtype=D) * 3
    mask = (torch.rand(3, 4) > 0.3).to(D)
    mask[:, 0] = 1
    p = torch.softmax(logits, -1)
    ent = -(p * torch.log_softmax(logits, -1)).sum(-1)  # -sum p log p
    cases["entropy"].append({"logits": logits.tolist(), "mask": mask.tolist(),
                             "entropy": ent.tolist(), "loss": masked_mean(ent, mask).item()})

# KL controllers (Ziegler et al. 2019): a sequence of updates.
for kind in ("fixed", "adaptive"):
    value, target, horizon = 0.05, 0.1, 500.0
    updates = [(0.3, 64), (0.02, 64), (0.1, 32), (0.11, 128), (1.0, 256), (0.0, 64)]
    seq = []
    for kl_now, n in updates:
        if kind == "adaptive":
            err = min(max(kl_now / target - 1, -0.2), 0.2)
            value *= 1 + err * n / horizon
        seq.append(value)
    cases["kl_ctrl"].append({"type": kind, "kl_coef": 0.05, "target_kl": target,
                             "horizon": horizon, "updates": updates, "values": seq})

with open(sys.argv[1], "w") as f:
    json.dump(cases, f)
