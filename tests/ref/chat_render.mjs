// Reference chat-template renderer for agentr1's parity test (@huggingface/jinja).
//
//   node chat_render.mjs --template qwen3=PATH [--template ...] --cases cases.json --out out.json
//
// PATH is a .jinja file or a tokenizer_config.json (its "chat_template").
// Writes {"<template>/<case id>": {"text": ...} | {"error": ...}}.
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const args = process.argv.slice(2);
const templates = {};
let casesPath = null;
let outPath = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--template") {
    const spec = args[++i];
    const eq = spec.indexOf("=");
    const name = spec.slice(0, eq);
    const path = spec.slice(eq + 1);
    let text = readFileSync(path, "utf8");
    if (path.endsWith(".json")) text = JSON.parse(text).chat_template;
    templates[name] = new Template(text);
  } else if (args[i] === "--cases") {
    casesPath = args[++i];
  } else if (args[i] === "--out") {
    outPath = args[++i];
  } else {
    console.error(`chat_render.mjs: unknown argument ${args[i]}`);
    process.exit(2);
  }
}
const spec = JSON.parse(readFileSync(casesPath, "utf8"));
const toolSets = spec.tool_sets ?? {};
const out = {};
for (const c of spec.cases) {
  let tools = c.tools ?? null;
  if (typeof tools === "string") tools = toolSets[tools];
  for (const name of c.templates ?? Object.keys(templates)) {
    const ctx = {
      messages: c.messages,
      tools,
      documents: null,
      add_generation_prompt: c.add_generation_prompt ?? false,
      bos_token: null,
      eos_token: "<|im_end|>",
      pad_token: "<|endoftext|>",
    };
    if ("enable_thinking" in c) ctx.enable_thinking = c.enable_thinking;
    const key = `${name}/${c.id}`;
    try {
      out[key] = { text: templates[name].render(ctx) };
    } catch (e) {
      out[key] = { error: String(e && e.message ? e.message : e) };
    }
  }
}
writeFileSync(outPath, JSON.stringify(out, null, 1));
