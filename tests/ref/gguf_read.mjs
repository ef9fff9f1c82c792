// An independent reading of a GGUF file for agentr1's GGUF export test
// (src/agentr1/model/gguf_test.cpp): @huggingface/gguf parses it, not our writer's code.
//
//   node tests/ref/gguf_read.mjs FILE.gguf
//
// Prints one JSON object on stdout:
//   {"version": 3, "tensor_count": N, "kv_count": N, "little_endian": true,
//    "tensor_data_offset": BYTES,                      // start of the data section
//    "metadata": {KEY: {"type": "UINT32", "value": V}, // arrays: "type": "ARRAY",
//                 ...},                                //   "element_type": "STRING", "value": [...]
//    "tensors": [{"name": ..., "dims": [ne0, ne1, ...], "type": "F16", "type_id": 1,
//                 "offset": BYTES}, ...]}              // offset relative to the data section
// 64-bit integers are printed as numbers (exact below 2^53). The file header's own
// counts (version, tensor_count, kv_count) are not repeated under "metadata".
import { gguf, GGUFValueType, GGMLQuantizationType } from "@huggingface/gguf";

const file = process.argv[2];
if (!file) {
  console.error("usage: node gguf_read.mjs FILE.gguf");
  process.exit(2);
}

const num = (v) => (typeof v === "bigint" ? Number(v) : v);
const plain = (v) => (Array.isArray(v) ? v.map(plain) : num(v));

const r = await gguf(file, { allowLocalFile: true, typedMetadata: true });
const header = new Set(["version", "tensor_count", "kv_count"]);
const metadata = {};
for (const [key, entry] of Object.entries(r.typedMetadata)) {
  if (header.has(key)) continue;
  const out = { type: GGUFValueType[entry.type] };
  if (entry.subType !== undefined) out.element_type = GGUFValueType[entry.subType];
  out.value = plain(entry.value);
  metadata[key] = out;
}
const tensors = r.tensorInfos.map((t) => ({
  name: t.name,
  dims: t.shape.map(num),
  type: GGMLQuantizationType[t.dtype],
  type_id: t.dtype,
  offset: num(t.offset),
}));
process.stdout.write(
  JSON.stringify({
    version: num(r.metadata.version),
    tensor_count: num(r.metadata.tensor_count),
    kv_count: num(r.metadata.kv_count),
    little_endian: r.littleEndian,
    tensor_data_offset: num(r.tensorDataOffset),
    metadata,
    tensors,
  }) + "\n",
);
