#!/usr/bin/env python3
"""Data parallelism on this machine: 1 process x T threads against N ranks x T/N threads.

    python3 bench/dp_bench.py [--agentr1 build/agentr1] [--steps 20] [--nproc 2] [--out runs/_bench_dp]

Runs `agentr1 train` on the built-in model and recipe (built first if missing; 8 prompts
x 16 samples = 128 trajectories and 2 optimiser steps per RL step) for a fixed number of
RL steps, as one process with all cores as torch threads and as `agentr1 launch --nproc N`
ranks with cores / N threads each, in the order A B B A (the machine is shared and its
speed drifts; each configuration's two runs are averaged). Prints steps per hour (from
the steps' own timing/step: the RL loop without the validations at the start and end),
the ratio to one process, and where a step's time goes: generation, the actor update
and, inside it, the gradient all-reduce; the all-gather of trajectories is inside
generation. For ranks the phase times are the slowest rank's.

Validation first (exit 1 if it fails): 2 steps with N ranks must give one process's
trajectories token for token, and the same gradient norm in step 1 (to 1e-4).
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run(agentr1, out, overrides, nproc, log):
    train = ["train", "--overwrite", "trainer.output_dir=" + out, "trainer.progress=false"] + overrides
    cmd = [agentr1] + (["launch", "--nproc", str(nproc)] if nproc > 1 else []) + train
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit("agentr1 failed (exit %d), see %s:\n  %s" % (rc, log, " ".join(cmd)))
    return time.time() - t0


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def step_lines(d):
    return [m for m in read_jsonl(os.path.join(d, "metrics.jsonl")) if "timing/gen" in m]


def responses(d, step):
    path = os.path.join(d, "trajectories", "step_%06d.jsonl" % step)
    return [(t["uid"], [s["response_ids"] for s in t["steps"]]) for t in read_jsonl(path)]


def mean(xs):
    return sum(xs) / max(1, len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agentr1", default="build/agentr1")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads of the single process")
    ap.add_argument("--out", default="runs/_bench_dp")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    per_rank = max(1, a.threads // a.nproc)

    # Validation: the same trajectories and the same first update.
    common = ["trainer.test_freq=0", "trainer.dump_trajectories=-1"]
    v1, v2 = os.path.join(a.out, "check_1"), os.path.join(a.out, "check_%d" % a.nproc)
    run(a.agentr1, v1, common + ["trainer.total_steps=2", "trainer.threads=%d" % a.threads], 1, v1 + ".log")
    run(a.agentr1, v2, common + ["trainer.total_steps=2", "trainer.threads=%d" % per_rank], a.nproc, v2 + ".log")
    for step in (1, 2):
        if responses(v1, step) != responses(v2, step):
            sys.exit("validation failed: step %d's trajectories differ between 1 process and %d ranks" % (step, a.nproc))
    g1, g2 = step_lines(v1)[0]["actor/grad_norm"], step_lines(v2)[0]["actor/grad_norm"]
    if abs(g1 - g2) > 1e-4 * abs(g1):
        sys.exit("validation failed: step 1 gradient norm %.8g (1 process) vs %.8g (%d ranks)" % (g1, g2, a.nproc))
    print("validated: 2 steps x 128 trajectories identical token for token; step-1 gradient norm %.8g vs %.8g"
          % (g1, g2))

    configs = [("1 process x %d threads" % a.threads, 1, a.threads),
               ("%d ranks x %d thread%s" % (a.nproc, per_rank, "s" if per_rank > 1 else ""), a.nproc, per_rank)]
    results = {name: [] for name, _, _ in configs}
    for k, (name, nproc, threads) in enumerate([configs[0], configs[1], configs[1], configs[0]]):
        d = os.path.join(a.out, "run%d" % k)
        wall = run(a.agentr1, d, ["trainer.total_steps=%d" % a.steps, "trainer.test_freq=0",
                                  "trainer.threads=%d" % threads], nproc, d + ".log")
        lines = step_lines(d)
        results[name].append({
            "step_s": mean([m["timing/step"] for m in lines]),
            "gen_s": mean([m["timing/gen"] for m in lines]),
            "update_s": mean([m.get("timing/update_actor", 0) for m in lines]),
            "allreduce_s": mean([m.get("timing/allreduce_actor", 0) for m in lines]),
            "wall_s": wall,
        })
        print("  %-24s run %d: %.2f s/step" % (name, k, results[name][-1]["step_s"]), flush=True)

    base = mean([r["step_s"] for r in results[configs[0][0]]])
    print("\n| configuration | steps/h | vs 1 process | step s | generation s | update s | all-reduce s |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    table = []
    for name, _, _ in configs:
        rs = results[name]
        step_s = mean([r["step_s"] for r in rs])
        row = {"config": name, "steps_per_h": 3600 / step_s, "ratio": base / step_s, "step_s": step_s,
               "gen_s": mean([r["gen_s"] for r in rs]), "update_s": mean([r["update_s"] for r in rs]),
               "allreduce_s": mean([r["allreduce_s"] for r in rs])}
        table.append(row)
        print("| %s | %.0f | %.2fx | %.2f | %.2f | %.2f | %.3f |" % (name, row["steps_per_h"], row["ratio"], step_s,
                                                                  row["gen_s"], row["update_s"], row["allreduce_s"]))
    with open(os.path.join(a.out, "dp_bench.json"), "w") as f:
        json.dump({"steps": a.steps, "nproc": a.nproc, "runs": results, "table": table}, f, indent=1)


if __name__ == "__main__":
    main()
