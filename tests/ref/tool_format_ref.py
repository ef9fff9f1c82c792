#!/usr/bin/python3
"""Reference renders for agentr1's tool-format tests (Debian python3-jinja2).

Renders real chat templates the way HF transformers' apply_chat_template(tokenize=False)
does (the environment of chat_render.py), with the template's special tokens
(bos_token, eos_token, ... from tokenizer_config.json; AddedToken objects as their
"content") passed as variables.

  tool_format_ref.py --cases cases.json --out out.json

cases.json: {"templates": {"<name>": "<tokenizer_config.json or .jinja path>"},
             "cases": [{"id": "...", "template": "<name>", "messages": [...],
                        "tools": [...] | null, "add_generation_prompt": bool,
                        "prefix": N,            # optional: also render messages[:N]
                        "prefix_generation_prompt": bool}]}   # ... with this flag
Writes {"<id>": {"text": ..., "prefix_text": ...} | {"error": "..."}}.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_render import make_env  # noqa: E402


def load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if not path.endswith(".json"):
        return text, {}
    cfg = json.loads(text)
    tokens = {}
    for key, value in cfg.items():
        if key.endswith("_token"):
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                tokens[key] = value
    return cfg["chat_template"], tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.cases, encoding="utf-8") as f:
        spec = json.load(f)
    env = make_env()
    templates = {}
    for name, path in spec["templates"].items():
        text, tokens = load(path)
        templates[name] = (env.from_string(text), tokens)
    out = {}
    for case in spec["cases"]:
        template, tokens = templates[case["template"]]

        def render(messages, gen):
            return template.render(messages=messages, tools=case.get("tools"), documents=None,
                                   add_generation_prompt=gen, **tokens)

        gen = case.get("add_generation_prompt", False)
        try:
            entry = {"text": render(case["messages"], gen)}
            if "prefix" in case:
                entry["prefix_text"] = render(case["messages"][:case["prefix"]],
                                              case.get("prefix_generation_prompt", False))
        except Exception as e:  # recorded, compared by the test
            entry = {"error": type(e).__name__ + ": " + str(e)}
        out[case["id"]] = entry
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
