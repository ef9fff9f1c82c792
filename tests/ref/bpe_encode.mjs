// Encodes strings with the reference tokenizer (@huggingface/tokenizers, tokenizers.js)
// loaded from a tokenizer directory, and decodes the ids back.
//
//   node bpe_encode.mjs <tokenizer_dir> <input.jsonl>
//
// input: one {"text": "..."} per line. output (stdout): one line per input,
//   {"ids": [...], "decoded": "...", "nfc": "..."}
// where decoded = decode(ids) (special tokens kept) and nfc = text.normalize("NFC"),
// the text a byte-level NFC tokenizer must give back.
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, input] = process.argv.slice(2);
if (!dir || !input) {
  console.error("usage: node bpe_encode.mjs <tokenizer_dir> <input.jsonl>");
  process.exit(2);
}
const tokenizerJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tokenizerJson, tokenizerConfig);

const out = [];
for (const line of fs.readFileSync(input, "utf8").split("\n")) {
  if (line.trim() === "") continue;
  const { text } = JSON.parse(line);
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  const decoded = ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false });
  out.push(JSON.stringify({ ids, decoded, nfc: text.normalize("NFC") }));
}
process.stdout.write(out.join("\n") + "\n");
