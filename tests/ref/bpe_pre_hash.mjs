// How llama.cpp's convert_hf_to_gguf.py identifies a BPE pre-tokenizer, for agentr1's
// GGUF export test: it encodes a fixed check text (special tokens added, as
// transformers' encode does) and hashes the Python text of the id list, "[1, 2, 3]",
// with SHA-256; a table of known hashes gives tokenizer.ggml.pre.
//
//   node tests/ref/bpe_pre_hash.mjs TOKENIZER_DIR...
//
// Prints one JSON line per directory: {"dir": ..., "ids": N, "sha256": HEX}. The
// tokenizer is @huggingface/tokenizers (tokenizers.js) loaded from DIR/tokenizer.json and
// DIR/tokenizer_config.json.
import { Tokenizer } from "@huggingface/tokenizers";
import crypto from "crypto";
import fs from "fs";
import path from "path";

// The converter's check text (get_vocab_base_pre's chktxt), character for character.
const CHKTXT =
  "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ " +
  "🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ " +
  "------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you " +
  "sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL";

for (const dir of process.argv.slice(2)) {
  const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
  const tok = new Tokenizer(read("tokenizer.json"), read("tokenizer_config.json"));
  const enc = tok.encode(CHKTXT);
  const ids = Array.from(enc.ids ?? enc);
  const text = "[" + ids.join(", ") + "]";
  const sha256 = crypto.createHash("sha256").update(text).digest("hex");
  process.stdout.write(JSON.stringify({ dir, ids: ids.length, sha256 }) + "\n");
}
