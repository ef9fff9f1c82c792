#!/usr/bin/env python3
"""Independent reference for agentr1's algo layer (run with Debian's python3-torch).

Implements the published formulas directly (GRPO / Dr.GRPO group advantages, PPO
clipped surrogate with dual clip, KL estimators k1/abs/k2/k3, loss aggregation modes
as in verl's core_algos) on random inputs, and writes inputs and expected outputs as
JSON for algo_test.cpp to compare against.

usage: algo_ref.py OUT.json
"""
import json
import sys

import torch

torch.manual_seed(1234)


def masked_mean(x, m):
    return (x * m).sum() / m.sum().clamp(min=1)


def agg(loss, mask, mode, norm_len=None):
    if mode == "token-mean":
        return masked_mean(loss, mask)
    if mode == "seq-mean-token-sum":
        return (loss * mask).sum(-1).mean()
    if mode == "seq-mean-token-mean":
        return ((loss * mask).sum(-1) / mask.sum(-1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (loss * mask).sum(-1).sum() / (norm_len or mask.shape[-1])
    raise ValueError(mode)


def grpo(scores, groups, norm_by_std, eps=1e-6):
    out = []
    for i, s in enumerate(scores):
        members = torch.tensor([scores[j] for j in range(len(scores)) if groups[j] == groups[i]],
                               dtype=torch.float64)
        if len(members) == 1:
            mean, std = 0.0, 1.0
        else:
            mean, std = members.mean().item(), members.std().item()  # unbiased
        out.append((s - mean) / (std + eps) if norm_by_std else s - mean)
    return out


def ppo(logp, old, adv, mask, low, high, c, mode):
    nk = torch.clamp(logp - old, -20, 20)
    ratio = torch.exp(nk)
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - low, 1 + high)
    lc = torch.maximum(l1, l2)
    l3 = -adv * c
    ld = torch.minimum(l3, lc)
    per = torch.where(adv < 0, ld, lc)
    return {
        "loss": agg(per, mask, mode).item(),
        "pg_clipfrac": masked_mean((l2 > l1).double(), mask).item(),
        "pg_clipfrac_lower": masked_mean(((lc > l3) & (adv < 0)).double(), mask).item(),
        "ppo_kl": masked_mean(-nk, mask).item(),
    }


def kl(logp, ref, kind):
    if kind == "k1":
        return logp - ref
    if kind == "abs":
        return (logp - ref).abs()
    if kind == "k2":
        return 0.5 * (logp - ref) ** 2
    if kind == "low_var_kl":
        r = torch.clamp(ref - logp, -20, 20)
        return torch.clamp(torch.exp(r) - r - 1, -10, 10)
    raise ValueError(kind)


cases = {"grpo": [], "ppo": [], "kl": [], "agg": []}
# GRPO: groups of different sizes incl. a singleton and a constant group.
scores = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 2.0, 0.3, -1.0, 0.7]
groups = ["a", "a", "a", "a", "b", "b", "c", "c", "d", "e", "e", "e"]
for norm in (True, False):
    cases["grpo"].append({"scores": scores, "groups": groups, "norm_by_std": norm,
                          "expected": grpo(scores, groups, norm)})

B, T = 5, 9
for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
    for low, high, c in ((0.2, 0.2, 3.0), (0.2, 0.28, 2.0)):
        logp = -torch.rand(B, T, dtype=torch.float64) * 3
        old = logp + torch.randn(B, T, dtype=torch.float64) * 0.4
        adv = torch.randn(B, T, dtype=torch.float64)
        mask = (torch.rand(B, T) > 0.3).double()
        mask[:, 0] = 1  # every row has a token (verl's assumption)
        cases["ppo"].append({"logp": logp.tolist(), "old": old.tolist(), "adv": adv.tolist(),
                             "mask": mask.tolist(), "low": low, "high": high, "c": c,
                             "mode": mode, "expected": ppo(logp, old, adv, mask, low, high, c, mode)})
    loss = torch.randn(B, T, dtype=torch.float64)
    mask = (torch.rand(B, T) > 0.4).double()
    mask[:, 0] = 1
    cases["agg"].append({"loss": loss.tolist(), "mask": mask.tolist(), "mode": mode,
                         "expected": agg(loss, mask, mode).item()})
for kind in ("k1", "abs", "k2", "low_var_kl"):
    logp = -torch.rand(B, T, dtype=torch.float64) * 4
    ref = -torch.rand(B, T, dtype=torch.float64) * 4
    ref[0, 0] = logp[0, 0] - 30.0  # exercises the clamps
    cases["kl"].append({"logp": logp.tolist(), "ref": ref.tolist(), "kind": kind,
                        "expected": kl(logp, ref, kind).tolist()})

with open(sys.argv[1], "w") as f:
    json.dump(cases, f)
