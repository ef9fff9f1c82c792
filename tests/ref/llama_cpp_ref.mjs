// llama.cpp as a reference runtime for agentr1's GGUF export: greedy ids for given
// prompt ids, and a small decode/prefill benchmark. llama.cpp comes from node-llama-cpp's
// prebuilt CPU binary (@node-llama-cpp/linux-x64, installed by scripts/setup.sh); it is
// never built from source here and never uses a GPU.
//
// Greedy ids (tests/gguf_llama_cpp_test.sh):
//   node tests/ref/llama_cpp_ref.mjs --model A.gguf [--model B.gguf ...] --prompts '[[1,2,3],[4,5]]'
//        [--max-new-tokens 16] [--threads 2] [--margins] [--kv-type F32] [--flash-attention]
//   --prompts: a JSON array of prompt id arrays, or @FILE holding one. For each model, then
//   each prompt, in order, prints one JSON line
//     {"model": PATH, "prompt_ids": [...], "token_ids": [...], "logprobs": [...]
//      [, "margins": [...]]}
//   token_ids: --max-new-tokens greedy ids (end-of-generation tokens do not stop it);
//   logprobs[i]: log p(token_ids[i]), llama.cpp's softmax of the logits. --margins adds
//   margins[i] = log p(top 1) - log p(top 2) at each step (a step with a small margin can
//   flip between runtimes; callers use it to tell a near-tie from a wrong weight); it
//   costs ~0.1 s a step with a 150k vocabulary (node-llama-cpp builds the whole
//   distribution in JavaScript), so ask for it only to diagnose a difference.
//   The KV cache is F32 here by default (llama.cpp's own default, F16, rounds keys and
//   values: ~2e-3 on these log-probs), flash attention off.
//
// Benchmark (for bench/ programs):
//   node tests/ref/llama_cpp_ref.mjs --model M.gguf --bench [--threads 2]
//        [--decode-tokens 64] [--sequences 1,8] [--prefill-tokens 512]
//        [--kv-type F16|F32|Q8_0...] [--flash-attention]
//   Prints one JSON line per model:
//     {"model": PATH, "threads": N, "kv_type": T|null, "flash_attention": B|null,
//      "llama_cpp": "<node-llama-cpp version>",
//      "decode": [{"sequences": S, "tokens_per_sequence": T, "tokens": S*T, "seconds": X,
//                  "tokens_per_s": Y}, ...],        // one entry per --sequences value
//      "prefill": {"tokens": P, "seconds": X, "tokens_per_s": Y}}
//   kv_type / flash_attention: null = node-llama-cpp's defaults (F16 cache), what a user of
//   llama.cpp gets. decode: S sequences of one context, each first fed a 4-token prompt
//   (not timed), then generating T greedy tokens concurrently (llama.cpp batches the S
//   sequences into one decode per step); tokens_per_s = S*T / wall seconds. prefill: one
//   sequence evaluating a P-token prompt in one batch (batch size P). Prompt ids are fixed
//   and deterministic ((i + k) * 7919 mod vocab). --threads is the exact thread count
//   (default 2): the Llama instance is created with maxThreads 0, so the context's
//   threads are not a hint.
import { getLlama } from "node-llama-cpp";
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const o = {
    models: [], prompts: undefined, margins: false, maxNewTokens: 16, threads: 2, kvType: undefined, flash: undefined,
    bench: false, decodeTokens: 64, sequences: [1, 8], prefillTokens: 512,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    const int = (name, v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be an integer >= 1, got '${v}'`);
      return n;
    };
    if (a === "--model") o.models.push(next());
    else if (a === "--prompts") o.prompts = next();
    else if (a === "--margins") o.margins = true;
    else if (a === "--max-new-tokens") o.maxNewTokens = int(a, next());
    else if (a === "--threads") o.threads = int(a, next());
    else if (a === "--kv-type") o.kvType = next();
    else if (a === "--flash-attention") o.flash = true;
    else if (a === "--bench") o.bench = true;
    else if (a === "--decode-tokens") o.decodeTokens = int(a, next());
    else if (a === "--sequences") o.sequences = next().split(",").map((s) => int(a, s));
    else if (a === "--prefill-tokens") o.prefillTokens = int(a, next());
    else throw new Error(`unknown argument ${a}`);
  }
  if (o.models.length === 0) throw new Error("--model FILE.gguf is required");
  if (!o.bench && !o.prompts) throw new Error("give --prompts JSON (greedy ids) or --bench");
  if (!o.bench) {
    o.kvType ??= "F32";
    o.flash ??= false;
  }
  return o;
}

// Context options shared by both modes; undefined leaves node-llama-cpp's default.
function contextOptions(o, extra) {
  const c = { threads: o.threads, ...extra };
  if (o.flash !== undefined) c.flashAttention = o.flash;
  if (o.kvType !== undefined) {
    c.experimentalKvCacheKeyType = o.kvType;
    c.experimentalKvCacheValueType = o.kvType;
  }
  return c;
}

// Greedy continuation of one prompt with per-step log-probs (and top-1/top-2 margins).
async function greedy(sequence, promptIds, maxNewTokens, margins) {
  const out = { prompt_ids: promptIds, token_ids: [], logprobs: [] };
  if (margins) out.margins = [];
  const meta = margins ? { probabilities: true } : { confidence: true };
  const it = sequence.evaluateWithMetadata(promptIds, meta, { temperature: 0 });
  for await (const step of it) {
    out.token_ids.push(step.token);
    if (margins) {
      const top = step.probabilities.entries();  // most likely first
      const p1 = top.next().value[1];
      const second = top.next();
      out.margins.push(Math.log(p1) - Math.log(second.done ? 0 : second.value[1]));
      out.logprobs.push(Math.log(step.probabilities.get(step.token)));
    } else {
      out.logprobs.push(Math.log(step.confidence));
    }
    if (out.token_ids.length >= maxNewTokens) break;
  }
  return out;
}

function benchIds(n, vocab, offset) {
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(((i + offset) * 7919) % vocab);
  return ids;
}

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

async function bench(model, modelPath, o) {
  const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  const result = {
    model: modelPath, threads: o.threads, kv_type: o.kvType ?? null, flash_attention: o.flash ?? null,
    llama_cpp: llamaVersion(), decode: [], prefill: null,
  };
  for (const S of o.sequences) {
    const ctx = await model.createContext(contextOptions(o, {
      sequences: S, contextSize: S * (o.decodeTokens + 8), batchSize: Math.max(S, 8),
    }));
    const seqs = [];
    for (let s = 0; s < S; s++) seqs.push(ctx.getSequence());
    await Promise.all(seqs.map((q, s) => q.evaluateWithoutGeneratingNewTokens(benchIds(4, vocab, 1 + s))));
    const t0 = process.hrtime.bigint();
    await Promise.all(seqs.map(async (q) => {
      let n = 0;
      // The 4-token prompt is in the cache; feed one more id and generate from there.
      for await (const _ of q.evaluate([benchIds(1, vocab, 5)[0]], { temperature: 0 })) {
        if (++n >= o.decodeTokens) break;
      }
    }));
    const secs = seconds(t0);
    result.decode.push({
      sequences: S, tokens_per_sequence: o.decodeTokens, tokens: S * o.decodeTokens, seconds: secs,
      tokens_per_s: (S * o.decodeTokens) / secs,
    });
    await ctx.dispose();
  }
  const P = o.prefillTokens;
  const ctx = await model.createContext(contextOptions(o, { sequences: 1, contextSize: P + 8, batchSize: P }));
  const q = ctx.getSequence();
  const t0 = process.hrtime.bigint();
  await q.evaluateWithoutGeneratingNewTokens(benchIds(P, vocab, 0));
  const secs = seconds(t0);
  result.prefill = { tokens: P, seconds: secs, tokens_per_s: P / secs };
  await ctx.dispose();
  return result;
}

function llamaVersion() {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(here, "node_modules/node-llama-cpp/package.json"), "utf8"));
    return pkg.version;
  } catch {
    return "unknown";
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  // CPU only, the prebuilt binary only: a missing binary is an error, never a build.
  const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, maxThreads: 0, logLevel: "error", progressLogs: false,
  });
  for (const modelPath of o.models) {
    const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    if (o.bench) {
      process.stdout.write(JSON.stringify(await bench(model, modelPath, o)) + "\n");
    } else {
      const text = o.prompts.startsWith("@") ? fs.readFileSync(o.prompts.slice(1), "utf8") : o.prompts;
      const prompts = JSON.parse(text);
      const longest = Math.max(...prompts.map((p) => p.length));
      const ctx = await model.createContext(contextOptions(o, {
        sequences: 1, contextSize: longest + o.maxNewTokens + 8, batchSize: Math.max(longest, 8),
      }));
      const seq = ctx.getSequence();
      for (const p of prompts) {
        await seq.clearHistory();
        const r = await greedy(seq, p, o.maxNewTokens, o.margins);
        process.stdout.write(JSON.stringify({ model: modelPath, ...r }) + "\n");
      }
      await ctx.dispose();
    }
    await model.dispose();
  }
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llama_cpp_ref.mjs: ${e && e.message ? e.message : e}`);
  process.exit(1);
});
