#!/usr/bin/python3
"""The decode loop a PyTorch user would write: rollout_bench's baseline.

A plain eager KV-cache sampling loop in the style of HF transformers, on Debian's
python3-torch: per-layer key/value tensors grown by torch.cat, eager attention
(repeat_kv, matmul, softmax in fp32), logits of the last position only, sampling with
torch.multinomial and the sampled token's log-prob from log_softmax. It loads the same
HF checkpoint directory the engine loads (config.json + model.safetensors; Qwen2,
Qwen3 and Llama) and writes what it generated and how long it took as JSON.

  hf_decode_loop.py --model DIR --prompts prompts.json --max-new 128 --threads 2 \
                    --temperature 1.0 --seed 1 --out result.json

prompts.json is a list of token-id lists of equal length (one batch). Generation runs
for exactly --max-new tokens per row (no stop tokens), as rollout_bench's engine runs.
"""
import argparse
import json
import math
import struct
import time

import torch

_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        buf = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).to(torch.float32)
    return out


class Model:
    def __init__(self, model_dir):
        with open(f"{model_dir}/config.json") as f:
            c = json.load(f)
        self.n_layers = c["num_hidden_layers"]
        self.n_heads = c["num_attention_heads"]
        self.n_kv = c.get("num_key_value_heads", self.n_heads)
        self.head_dim = c.get("head_dim", c["hidden_size"] // self.n_heads)
        self.eps = c["rms_norm_eps"]
        self.theta = c.get("rope_theta", 10000.0)
        self.qk_norm = c.get("model_type") == "qwen3"
        w = load_safetensors(f"{model_dir}/model.safetensors")
        self.w = w
        self.lm_head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))

    def rms(self, x, weight):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(var + self.eps))

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def forward(self, ids, past, start):
        """ids [B,T]; past: list of (k, v) per layer or None; start: cached length."""
        B, T = ids.shape
        w = self.w
        x = torch.nn.functional.embedding(ids, w["model.embed_tokens.weight"])
        pos = torch.arange(start, start + T).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = None
        if T > 1:
            S = start + T
            mask = torch.full((T, S), float("-inf")).triu(start + 1)
        new_past = []
        rep = self.n_heads // self.n_kv
        for l in range(self.n_layers):
            p = f"model.layers.{l}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = torch.nn.functional.linear(h, w[p + "self_attn.q_proj.weight"], w.get(p + "self_attn.q_proj.bias"))
            k = torch.nn.functional.linear(h, w[p + "self_attn.k_proj.weight"], w.get(p + "self_attn.k_proj.bias"))
            v = torch.nn.functional.linear(h, w[p + "self_attn.v_proj.weight"], w.get(p + "self_attn.v_proj.bias"))
            q = q.view(B, T, self.n_heads, self.head_dim)
            k = k.view(B, T, self.n_kv, self.head_dim)
            if self.qk_norm:
                q = self.rms(q, w[p + "self_attn.q_norm.weight"])
                k = self.rms(k, w[p + "self_attn.k_norm.weight"])
            q = q.transpose(1, 2)
            k = k.transpose(1, 2)
            v = v.view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            if past is not None:
                k = torch.cat((past[l][0], k), dim=2)
                v = torch.cat((past[l][1], v), dim=2)
            new_past.append((k, v))
            kr = k.repeat_interleave(rep, dim=1)
            vr = v.repeat_interleave(rep, dim=1)
            scores = torch.matmul(q, kr.transpose(2, 3)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
            o = torch.matmul(probs, vr).transpose(1, 2).reshape(B, T, -1)
            x = x + torch.nn.functional.linear(o, w[p + "self_attn.o_proj.weight"])
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            g = torch.nn.functional.linear(h, w[p + "mlp.gate_proj.weight"])
            u = torch.nn.functional.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + torch.nn.functional.linear(torch.nn.functional.silu(g) * u, w[p + "mlp.down_proj.weight"])
        x = self.rms(x[:, -1:, :], w["model.norm.weight"])
        logits = torch.nn.functional.linear(x, self.lm_head)[:, -1, :].float()
        return logits, new_past


def generate(model, prompts, max_new, temperature, seed):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor(prompts, dtype=torch.long)
    past, start = None, 0
    out_ids, out_lp = [], []
    with torch.no_grad():
        for _ in range(max_new):
            logits, past = model.forward(ids, past, start)
            start += ids.shape[1]
            if temperature == 0.0:
                nxt = logits.argmax(-1, keepdim=True)
                logp = torch.log_softmax(logits, dim=-1)
            else:
                logp = torch.log_softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(logp.exp(), 1, generator=gen)
            out_ids.append(nxt)
            out_lp.append(logp.gather(-1, nxt))
            ids = nxt
    return torch.cat(out_ids, 1).tolist(), torch.cat(out_lp, 1).tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--max-new", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=8, help="tokens generated once before timing")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = Model(a.model)
    with open(a.prompts) as f:
        prompts = json.load(f)
    if a.warmup > 0:
        generate(model, prompts, a.warmup, a.temperature, a.seed)
    t0 = time.perf_counter()
    c0 = time.process_time()
    ids, lps = generate(model, prompts, a.max_new, a.temperature, a.seed)
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    with open(a.out, "w") as f:
        json.dump({"token_ids": ids, "logprobs": lps, "seconds": secs, "cpu_seconds": cpu,
                   "torch": torch.__version__, "threads": torch.get_num_threads()}, f)


if __name__ == "__main__":
    main()
