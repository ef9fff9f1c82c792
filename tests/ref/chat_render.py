#!/usr/bin/python3
"""Reference chat-template renderer for agentr1's parity test (Debian python3-jinja2).

Replicates HF transformers' apply_chat_template(tokenize=False) environment:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols),
tojson overridden with json.dumps(ensure_ascii=False, indent, separators, sort_keys=False),
raise_exception and strftime_now globals, special tokens passed as variables.

  chat_render.py --template qwen3=PATH [--template ...] --cases cases.json --out out.json

PATH is a .jinja file or a tokenizer_config.json (its "chat_template").
Writes {"<template>/<case id>": {"text": ...} | {"error": ...}}.
"""
import argparse
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def load_template(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)["chat_template"]
    return text


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", action="append", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    env = make_env()
    templates = {}
    for spec in args.template:
        name, path = spec.split("=", 1)
        templates[name] = env.from_string(load_template(path))
    with open(args.cases, encoding="utf-8") as f:
        spec = json.load(f)
    tool_sets = spec.get("tool_sets", {})
    out = {}
    for case in spec["cases"]:
        tools = case.get("tools")
        if isinstance(tools, str):
            tools = tool_sets[tools]
        for name in case.get("templates", list(templates)):
            kwargs = dict(messages=case["messages"], tools=tools, documents=None,
                          add_generation_prompt=case.get("add_generation_prompt", False),
                          bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>")
            if "enable_thinking" in case:
                kwargs["enable_thinking"] = case["enable_thinking"]
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
