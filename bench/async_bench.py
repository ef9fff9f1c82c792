#!/usr/bin/env python3
"""Asynchronous rollout against synchronous training on the built-in task, side by side.

    python3 bench/async_bench.py [--agentr1 build/agentr1] [--steps 30] [--out runs/_bench_async]

Runs `agentr1 train` (the built-in model and recipe; built first if missing) for a fixed
number of RL steps in these configurations, one after the other in one invocation:

    with tool latency (rollout.env_kwargs.tool_latency_ms=[100,300]):
        sync | async max_staleness 1 and 2, each with no correction and with tis |
        async max_staleness 1 with the rollout engine at normal priority (engine_nice=0;
        the default 10 lets the learner keep the cores)
    without latency:
        sync | async max_staleness=1

Async runs use partial rollouts, with the truncated-IS correction (actor.off_policy.method=tis,
token level, cap 2; it adds the learner's scoring pass for pi_old) or none (PPO against the
behaviour log-probs, which need no scoring pass). Every run validates at the start and the end only (test_freq=0), so
no mid-run validation hides rollout work. It prints steps per hour (from the steps' own
timing/step, i.e. the RL loop without the validations), the ratio to the synchronous run
of the same latency, the final greedy success on the 128 held-out problems with its
standard error, and where the time went (rollout busy, learner busy, their overlap).

Validation first (exit 1 if it fails): 2 steps of the async source at max_staleness 0
must give the synchronous run's trajectories token for token, and every trained step of
every async run must be within its staleness bound.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time


def run_train(agentr1, out, overrides, log):
    cmd = [agentr1, "train", "--overwrite", "trainer.output_dir=" + out, "trainer.progress=false"] + overrides
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit("agentr1 train failed (exit %d), see %s:\n  %s" % (rc, log, " ".join(cmd)))
    return time.time() - t0


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def step_lines(run):
    return [m for m in read_jsonl(os.path.join(run, "metrics.jsonl")) if "timing/gen" in m]


def responses(run, step):
    path = os.path.join(run, "trajectories", "step_%06d.jsonl" % step)
    return [s["response_ids"] for t in read_jsonl(path) for s in t["steps"]]


def check_bound(run, k):
    for m in step_lines(run):
        if m.get("async/staleness_max", 0) > k:
            sys.exit("VALIDATION FAILED: %s step %d has staleness %g > %d" % (run, m["step"], m["async/staleness_max"], k))
        step = int(m["step"])
        path = os.path.join(run, "trajectories", "step_%06d.jsonl" % step)
        for t in read_jsonl(path):
            for s in t["steps"]:
                if s["policy_version"] < step - 1 - k or s["policy_version"] > step - 1:
                    sys.exit("VALIDATION FAILED: %s step %d holds a step of version %d" % (run, step, s["policy_version"]))


def summarize(run, k):
    lines = step_lines(run)
    steps = len(lines)
    loop_s = sum(m["timing/step"] for m in lines)
    summ = json.load(open(os.path.join(run, "summary.json")))
    p = summ["final"]["greedy_success"]
    n = summ["final"].get("num_prompts", 128)
    mean = lambda key: sum(m.get(key, 0.0) for m in lines) / max(1, steps)
    return {
        "steps": steps,
        "loop_s": loop_s,
        "steps_per_hour": 3600.0 * steps / loop_s,
        "success": p,
        "se": math.sqrt(max(p * (1 - p), 1e-12) / n),
        "baseline": summ["baseline"]["greedy_success"],
        "wait_s": mean("timing/gen"),
        "update_s": mean("timing/update_actor"),
        "rollout_busy": mean("async/rollout_busy_s"),
        "learner_busy": mean("async/learner_busy_s"),
        "overlap": mean("async/overlap_s"),
        "staleness": mean("async/staleness_mean"),
        "dropped": sum(m.get("async/dropped_trajectories", 0) for m in lines),
        "is_capped": mean("off_policy/capped_frac"),
        "k": k,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agentr1", default="build/agentr1")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--latency", default="100,300", help="tool latency lo,hi in ms")
    ap.add_argument("--out", default="runs/_bench_async")
    ap.add_argument("--extra", default="", help="more key=value overrides for every run, comma-separated")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    extra = [x for x in args.extra.split(",") if x]
    lo, hi = args.latency.split(",")
    lat = ["+rollout.env_kwargs.tool_latency_ms=[%s,%s]" % (lo, hi), "trainer.tool_threads=64"]
    common = ["trainer.test_freq=0", "trainer.total_steps=%d" % args.steps] + extra
    async_opts = ["rollout.partial_rollout=true"]

    # 1. Validation: the async machinery at staleness 0 is the synchronous trainer.
    small = ["trainer.total_steps=2", "trainer.test_freq=0", "data.val_size=8", "trainer.dump_trajectories=-1",
             "data.train_batch_size=4", "rollout.n=4", "trainer.threads=1"] + lat + extra
    print("validating: async at max_staleness 0 against sync (2 steps, 16 trajectories each) ...", flush=True)
    run_train(args.agentr1, os.path.join(args.out, "check_sync"), small, os.path.join(args.out, "check_sync.log"))
    run_train(args.agentr1, os.path.join(args.out, "check_async0"), small + ["rollout.async=true"],
              os.path.join(args.out, "check_async0.log"))
    for s in (1, 2):
        if responses(os.path.join(args.out, "check_sync"), s) != responses(os.path.join(args.out, "check_async0"), s):
            sys.exit("VALIDATION FAILED: step %d trajectories differ between sync and async at max_staleness 0" % s)
    print("  identical trajectories in both steps", flush=True)

    # 2. The runs.
    tis = ["actor.off_policy.method=tis"]
    none = ["actor.off_policy.method=none"]  # PPO against the behaviour log-probs: no scoring pass
    configs = [
        ("latency", "sync", 0, lat),
        ("latency", "async k=1 none", 1, lat + async_opts + none + ["rollout.max_staleness=1"]),
        ("latency", "async k=1 tis", 1, lat + async_opts + tis + ["rollout.max_staleness=1"]),
        ("latency", "async k=2 none", 2, lat + async_opts + none + ["rollout.max_staleness=2"]),
        ("latency", "async k=2 tis", 2, lat + async_opts + tis + ["rollout.max_staleness=2"]),
        ("latency", "async k=1 none, engine at nice 0", 1,
         lat + async_opts + none + ["rollout.max_staleness=1", "rollout.engine_nice=0"]),
        ("none", "sync", 0, []),
        ("none", "async k=1 none", 1, async_opts + none + ["rollout.max_staleness=1"]),
    ]
    results = []
    for tag, name, k, ov in configs:
        run = os.path.join(args.out, (tag + "_" + name).replace(",", "").replace(" ", "_").replace("=", ""))
        print("running %-8s latency=%-7s ..." % (name, tag), end="", flush=True)
        wall = run_train(args.agentr1, run, common + ov, run + ".log")
        if k > 0:
            check_bound(run, k)
        r = summarize(run, k)
        r.update(tag=tag, name=name, wall=wall)
        results.append(r)
        print(" %.0f s, %.0f steps/h, success %.3f" % (wall, r["steps_per_hour"], r["success"]), flush=True)

    print()
    print("| tool latency | run | steps/h | vs sync | final greedy success | rollout wait s/step | "
          "rollout busy s/step | learner busy s/step | overlap s/step | mean staleness | dropped | IS capped |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in results:
        base = next(x for x in results if x["tag"] == r["tag"] and x["name"] == "sync")
        lat_name = ("%s-%s ms" % (lo, hi)) if r["tag"] == "latency" else "none"
        print("| %s | %s | %.0f | %.2fx | %.3f +- %.3f | %.2f | %s | %s | %s | %s | %s | %s |" % (
            lat_name, r["name"], r["steps_per_hour"], r["steps_per_hour"] / base["steps_per_hour"], r["success"], r["se"],
            r["wait_s"],
            "%.2f" % r["rollout_busy"] if r["k"] else "-", "%.2f" % r["learner_busy"] if r["k"] else "-",
            "%.2f" % r["overlap"] if r["k"] else "-", "%.2f" % r["staleness"] if r["k"] else "0",
            "%d" % r["dropped"] if r["k"] else "-", "%.3f" % r["is_capped"] if r["k"] else "-"))
    print("\nbaseline greedy success (step 0): %.3f; %d RL steps per run; success on %s held-out problems" % (
        results[0]["baseline"], args.steps, "128"))
    json.dump(results, open(os.path.join(args.out, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
