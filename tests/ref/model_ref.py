#!/usr/bin/python3
"""Independent reference for agentr1's model layer (run with Debian's /usr/bin/python3).

Implements the HuggingFace Qwen2 / Qwen3 / Llama causal-LM forward in plain torch from
the published formulas (RMSNorm in fp32, rotate_half RoPE with
inv_freq = 1/theta^(arange(0,d,2)/d), GQA by repeating kv heads, causal softmax
attention scaled by 1/sqrt(head_dim), SwiGLU MLP, tied or separate lm_head), in
float64. It has its own safetensors reader and writer (struct + json); neither
transformers nor safetensors is needed.

  model_ref.py gen OUT_DIR
      writes random-weight checkpoints (config.json + model.safetensors), one
      directory per variant, and OUT_DIR/manifest.json with token sequences and the
      reference per-token log-probs of each.
  model_ref.py check MODEL_DIR SCORES_JSON TOL
      reads a model directory (single file or sharded index) written by someone
      else, recomputes log-probs of SCORES_JSON's {"sequences", "logprobs"} and
      exits 0 if the max abs difference is <= TOL (prints it either way).
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


# ---------------------------------------------------------------- safetensors
def write_safetensors(path, tensors, extra_header=None):
    """tensors: dict name -> tensor. Names sorted, data contiguous, header padded to 8."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        if t.dtype in (torch.bfloat16, torch.float16):
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if extra_header:
        header.update(extra_header)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), f"{path}: header length {n} beyond file"
    header = json.loads(data[8:8 + n].decode())
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        dt = DTYPES[e["dtype"]]
        numel = 1
        for d in e["shape"]:
            numel *= d
        assert end - b == numel * torch.tensor([], dtype=dt).element_size(), f"{path}: {name}: bad size"
        buf = bytearray(body[b:end])
        if dt in (torch.bfloat16, torch.float16):
            t = torch.frombuffer(buf, dtype=torch.int16).view(dt) if numel else torch.empty(0, dtype=dt)
        else:
            t = torch.frombuffer(buf, dtype=dt) if numel else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def read_model_dir(d):
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out = {}
    for fname in sorted(set(index["weight_map"].values())):
        part = read_safetensors(os.path.join(d, fname))
        for k, v in part.items():
            assert index["weight_map"][k] == fname, f"{k} listed in the wrong shard"
        out.update(part)
    assert set(out) == set(index["weight_map"]), "index and shards disagree"
    return out


# ---------------------------------------------------------------- forward
def rms_norm(x, w, eps):
    xf = x.to(torch.float64)
    xf = xf / torch.sqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def logprobs(cfg, W, ids):
    """Per-token log p(ids[t+1] | ids[:t+1]) for one sequence, computed in float64."""
    W = {k: v.to(torch.float64) for k, v in W.items()}
    arch = cfg["model_type"]
    H = cfg["hidden_size"]
    nH = cfg["num_attention_heads"]
    nKV = cfg.get("num_key_value_heads") or nH
    hd = cfg.get("head_dim") or H // nH
    eps = cfg["rms_norm_eps"]
    theta = cfg["rope_theta"]
    bias = True if arch == "qwen2" else cfg.get("attention_bias", False)
    T = len(ids)
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]  # [T, H]
    pos = torch.arange(T, dtype=torch.float64)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.outer(pos, inv_freq)
    cos = torch.cat((ang, ang), -1).cos()  # [T, hd]
    sin = torch.cat((ang, ang), -1).sin()
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

        def proj(name):
            y = h @ W[p + f"self_attn.{name}.weight"].T
            if bias:
                y = y + W[p + f"self_attn.{name}.bias"]
            return y

        q = proj("q_proj").reshape(T, nH, hd)
        k = proj("k_proj").reshape(T, nKV, hd)
        v = proj("v_proj").reshape(T, nKV, hd)
        if arch == "qwen3":
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, T, hd]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.repeat_interleave(k, nH // nKV, dim=0)
        v = torch.repeat_interleave(v, nH // nKV, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(T, nH * hd)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g * torch.sigmoid(g) * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    lp = torch.log_softmax(x @ head.T, dim=-1)
    return [float(lp[t, ids[t + 1]]) for t in range(T - 1)]


# ---------------------------------------------------------------- generation
VARIANTS = [
    # name, arch, overrides
    ("qwen2_untied", "qwen2", dict(tie=False, heads=4, kv=2, head_dim=None, theta=50000.0, layers=3)),
    ("qwen2_tied", "qwen2", dict(tie=True, heads=4, kv=2, head_dim=None, theta=20000.0, layers=2)),
    ("qwen3_untied", "qwen3", dict(tie=False, heads=4, kv=2, head_dim=32, theta=1000000.0, layers=3)),
    ("qwen3_tied_bias", "qwen3", dict(tie=True, heads=4, kv=2, head_dim=16, theta=30000.0, layers=2, bias=True)),
    ("llama_untied", "llama", dict(tie=False, heads=4, kv=2, head_dim=None, theta=500000.0, layers=3,
                                   inv_freq=True)),
    ("llama_tied_mqa", "llama", dict(tie=True, heads=4, kv=1, head_dim=None, theta=40000.0, layers=2,
                                     eos_list=True)),
]
LOW_PRECISION = [("qwen3_untied", "bf16"), ("qwen3_untied", "fp16"), ("llama_untied", "bf16"),
                 ("qwen2_tied", "fp16")]


def make_config(arch, o):
    V, H, I = 300, 64, 160
    cfg = {
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                           "llama": "LlamaForCausalLM"}[arch]],
        "model_type": arch, "vocab_size": V, "hidden_size": H, "intermediate_size": I,
        "num_hidden_layers": o["layers"], "num_attention_heads": o["heads"],
        "num_key_value_heads": o["kv"], "hidden_act": "silu", "max_position_embeddings": 128,
        "rope_theta": o["theta"], "rope_scaling": None, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": o["tie"], "bos_token_id": 1,
        "eos_token_id": [2, 3] if o.get("eos_list") else 2, "torch_dtype": "float32",
    }
    if o["head_dim"]:
        cfg["head_dim"] = o["head_dim"]
    if arch != "qwen2":
        cfg["attention_bias"] = bool(o.get("bias", False))
    return cfg


def make_weights(cfg, gen):
    """Random weights large enough that the log-probs are far from uniform (so bugs show)."""
    arch = cfg["model_type"]
    V, H, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    nH, nKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nH
    bias = True if arch == "qwen2" else cfg.get("attention_bias", False)

    def lin(o, i, scale=1.0):
        return torch.randn(o, i, generator=gen) * (scale / math.sqrt(i))

    def norm(n):
        return 1.0 + 0.3 * torch.randn(n, generator=gen)

    W = {"model.embed_tokens.weight": torch.randn(V, H, generator=gen)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        W[p + "input_layernorm.weight"] = norm(H)
        W[p + "post_attention_layernorm.weight"] = norm(H)
        W[p + "self_attn.q_proj.weight"] = lin(nH * hd, H, 2.0)
        W[p + "self_attn.k_proj.weight"] = lin(nKV * hd, H, 2.0)
        W[p + "self_attn.v_proj.weight"] = lin(nKV * hd, H)
        W[p + "self_attn.o_proj.weight"] = lin(H, nH * hd)
        if bias:
            for n, d in (("q_proj", nH * hd), ("k_proj", nKV * hd), ("v_proj", nKV * hd)):
                W[p + f"self_attn.{n}.bias"] = 0.5 * torch.randn(d, generator=gen)
        if arch == "qwen3":
            W[p + "self_attn.q_norm.weight"] = norm(hd)
            W[p + "self_attn.k_norm.weight"] = norm(hd)
        W[p + "mlp.gate_proj.weight"] = lin(I, H)
        W[p + "mlp.up_proj.weight"] = lin(I, H)
        W[p + "mlp.down_proj.weight"] = lin(H, I)
    W["model.norm.weight"] = norm(H)
    if not cfg["tie_word_embeddings"]:
        W["lm_head.weight"] = lin(V, H, 4.0)
    else:
        W["model.embed_tokens.weight"] *= 0.5
    return W


def gen(out_dir):
    g = torch.Generator().manual_seed(1234)
    seqs = [torch.randint(0, 300, (n,), generator=g).tolist() for n in (2, 9, 40, 100)]
    manifest = {"sequences": seqs, "models": []}
    fp32 = {}
    for name, arch, o in VARIANTS:
        cfg = make_config(arch, o)
        W = make_weights(cfg, g)
        fp32[name] = (cfg, W)
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        extra = dict(W)
        if o.get("inv_freq"):  # HF checkpoints may carry these buffers; loaders ignore them
            hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
            extra["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(hd // 2)
        write_safetensors(os.path.join(d, "model.safetensors"), extra)
        ref = [logprobs(cfg, W, s) for s in seqs]
        flat = [x for r in ref for x in r]
        manifest["models"].append({"name": name, "dir": d, "file_dtype": "fp32", "logprobs": ref,
                                   "spread": max(flat) - min(flat)})
    for name, dt in LOW_PRECISION:
        cfg, W = fp32[name]
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt]
        cfg = dict(cfg, torch_dtype={"bf16": "bfloat16", "fp16": "float16"}[dt])
        Wl = {k: v.to(tdt) for k, v in W.items()}
        d = os.path.join(out_dir, f"{name}_{dt}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(d, "model.safetensors"), Wl)
        # Exact reference for the rounded weights, and the fp32 model's for comparison.
        manifest["models"].append({
            "name": f"{name}_{dt}", "dir": d, "file_dtype": dt,
            "logprobs": [logprobs(cfg, Wl, s) for s in seqs],
            "logprobs_fp32_model": next(m["logprobs"] for m in manifest["models"] if m["name"] == name)})
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f)


def check(model_dir, scores_path, tol):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    W = read_model_dir(model_dir)
    with open(scores_path) as f:
        s = json.load(f)
    worst = 0.0
    for ids, theirs in zip(s["sequences"], s["logprobs"]):
        ours = logprobs(cfg, W, ids)
        assert len(ours) == len(theirs), f"length {len(theirs)} != {len(ours)}"
        for a, b in zip(ours, theirs):
            worst = max(worst, abs(a - b))
    print(f"max_abs_diff {worst:.3e}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
