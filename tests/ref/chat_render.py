#!/usr/bin/python3
"""Reference chat-template renderer for agentr1's parity test (Debian python3-jinja2).

Replicates HF transformers' apply_chat_template(tokenize=False) environment:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols),
tojson overridden with json.dumps(ensure_ascii=False, indent, separators, sort_keys=False),
raise_exception and strftime_now globals, the {% generation %} block, special tokens
passed as variables.

  chat_render.py --template qwen3=PATH [--template ...] --cases cases.json --out out.json
  chat_render.py --snippets snippets.json --out out.json

PATH is a .jinja file or a tokenizer_config.json (its "chat_template"); from a
tokenizer_config.json the special tokens are passed as transformers does (only those
set, AddedToken objects as their content), from a .jinja file the Qwen ones.
Writes {"<template>/<case id>": {"text": ...} | {"error": ...}}.
Snippet mode renders {"vars": {...}, "snippets": [{"id", "template"}]} (each snippet
with vars) and writes {"<id>": {"text": ...} | {"error": ...}}.
"""
import argparse
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token"]
QWEN_SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}


def token_content(tok):
    return tok["content"] if isinstance(tok, dict) else tok


def load_template(path):
    """Returns (template text, special tokens map) as transformers would pass them."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        config = json.loads(text)
        special = {}
        for key in SPECIAL_TOKENS:
            value = config.get(key)
            if value:
                special[key] = token_content(value)
        extra = config.get("additional_special_tokens")
        if extra:
            special["additional_special_tokens"] = [token_content(t) for t in extra]
        return config["chat_template"], special
    return text, dict(QWEN_SPECIAL)


def render_snippets(env, path, out_path):
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    out = {}
    for snip in spec["snippets"]:
        try:
            out[snip["id"]] = {"text": env.from_string(snip["template"]).render(**spec["vars"])}
        except Exception as e:  # recorded, compared by the test
            out[snip["id"]] = {"error": type(e).__name__ + ": " + str(e)}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)


class Generation(Extension):
    """transformers' AssistantTracker outside assistant-mask mode: {% generation %}
    renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", action="append")
    ap.add_argument("--cases")
    ap.add_argument("--snippets")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    env = make_env()
    if args.snippets:
        render_snippets(env, args.snippets, args.out)
        return 0
    templates = {}
    specials = {}
    for spec in args.template:
        name, path = spec.split("=", 1)
        text, specials[name] = load_template(path)
        templates[name] = env.from_string(text)
    with open(args.cases, encoding="utf-8") as f:
        spec = json.load(f)
    tool_sets = spec.get("tool_sets", {})
    out = {}
    for case in spec["cases"]:
        tools = case.get("tools")
        if isinstance(tools, str):
            tools = tool_sets[tools]
        for name in case.get("templates", list(templates)):
            # transformers: render(messages, tools, documents, add_generation_prompt,
            # **special_tokens_map, **kwargs)
            kwargs = dict(messages=case["messages"], tools=tools, documents=None,
                          add_generation_prompt=case.get("add_generation_prompt", False))
            kwargs.update(specials[name])
            if "enable_thinking" in case:
                kwargs["enable_thinking"] = case["enable_thinking"]
            kwargs.update(case.get("kwargs", {}))
            key = name + "/" + case["id"]
            try:
                out[key] = {"text": templates[name].render(**kwargs)}
            except Exception as e:  # recorded, compared by the test
                out[key] = {"error": type(e).__name__ + ": " + str(e)}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
