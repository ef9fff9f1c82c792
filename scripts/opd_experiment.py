#!/usr/bin/env python3
"""Online policy distillation on the built-in arithmetic task (issue 33's experiment).

    python3 scripts/opd_experiment.py --agentr1 build/agentr1 --out runs/opd [--seeds 42,7]

1. The teacher: the built-in default job (`agentr1 train`, GRPO from the built-in SFT
   model), unless --teacher names a model directory.
2. Arms from the SFT model the teacher started from (same seeds, same budget of RL steps
   and so of environment steps: trainer.total_steps x train_batch_size x rollout.n):
     grpo      GRPO alone (the default recipe)
     opd       k1_pg distillation alone (algorithm.distill.use_task_rewards=false)
     opd_task  k1_pg distillation plus the task's GRPO advantage
3. A student of half the width (hidden 64, built by `agentr1 sft`, --half-student),
   distilled from the same teacher, and GRPO on it for comparison.

Writes OUT/results.md (tables: held-out greedy success with its standard error at each
validation, cumulative learner compute from perf/learner_gflop, the first validated step
at >= 90% of the teacher's success), OUT/curves.dat (every run), OUT/mean_curves.dat and
OUT/opd_curves.png (mean over seeds against steps and against learner TFLOP; gnuplot,
when installed). Only the standard library.
"""
import argparse
import json
import math
import os
import subprocess
import sys


def run(cmd, log):
    print("+", " ".join(cmd), flush=True)
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit(f"failed ({rc}): {' '.join(cmd)}; see {log}")


def read_run(d):
    """(validations {step: (success, n)}, cumulative gflop {step: g}) of a run directory."""
    vals, gflop, total = {}, {}, 0.0
    n = json.load(open(os.path.join(d, "summary.json")))["baseline"].get("num_prompts", 128)
    for line in open(os.path.join(d, "metrics.jsonl")):
        j = json.loads(line)
        if "val/success/greedy" in j:
            vals[j["step"]] = (j["val/success/greedy"], n)
        if "timing/gen" in j:
            total += j.get("perf/learner_gflop", 0.0)
            gflop[j["step"]] = total
    gflop[0] = 0.0
    return vals, gflop


def se(p, n):
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agentr1", default="build/agentr1")
    ap.add_argument("--out", default="runs/opd")
    ap.add_argument("--seeds", default="42,7")
    ap.add_argument("--teacher", default="", help="teacher model directory (default: train one)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--half-student", action="store_true", help="also distill into a half-width student")
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",")]
    base = [f"trainer.total_steps={a.steps}", "trainer.test_freq=25", f"trainer.threads={a.threads}"]
    teacher = a.teacher
    if not teacher:
        tdir = os.path.join(a.out, "teacher")
        teacher = os.path.join(tdir, "checkpoints", f"step_{a.steps:06d}")
        if not a.report_only and not os.path.isdir(teacher):
            run([a.agentr1, "train", "--overwrite", f"trainer.output_dir={tdir}"] + base, tdir + ".log")
    arms = {
        "grpo": [],
        "opd": [f"algorithm.distill.teacher={teacher}", "algorithm.distill.use_task_rewards=false"],
        "opd_task": [f"algorithm.distill.teacher={teacher}", "algorithm.distill.use_task_rewards=true"],
    }
    runs = []  # (student, arm, seed, dir)
    for arm, extra in arms.items():
        for s in seeds:
            runs.append(("builtin", arm, s, os.path.join(a.out, f"{arm}_s{s}"), extra + [f"trainer.seed={s}"]))
    if a.half_student:
        half = os.path.join(a.out, "half_model")
        if not a.report_only and not os.path.isdir(half):
            opts = json.dumps({"dir": half, "hidden_size": 64, "intermediate_size": 192})
            run([a.agentr1, "sft", "--options", opts, "--out", half], half + ".log")
        for arm in ("grpo", "opd"):
            s = seeds[0]
            # The built-in recipe's RL settings (configs/builtin.yaml) apply to a model.path
            # only when given, so they are repeated here for the half-width model.
            runs.append(("half", arm, s, os.path.join(a.out, f"half_{arm}_s{s}"),
                         arms[arm] + [f"trainer.seed={s}", f"model.path={half}", "--config=" +
                                      os.path.join(os.path.dirname(a.agentr1), "share/agentr1/configs/builtin.yaml")]))
    for student, arm, s, d, extra in runs:
        if a.report_only or os.path.exists(os.path.join(d, "summary.json")) and \
                "final" in json.load(open(os.path.join(d, "summary.json"))):
            continue
        cfg = [x for x in extra if x.startswith("--config=")]
        over = [x for x in extra if not x.startswith("--config=")]
        run([a.agentr1, "train", "--overwrite", f"trainer.output_dir={d}"] + cfg + base + over, d + ".log")

    # Report.
    t_succ = None
    tsum = os.path.join(os.path.dirname(os.path.dirname(teacher.rstrip("/"))), "summary.json")
    if os.path.exists(tsum):
        t = json.load(open(tsum))["final"]
        t_succ = (t["greedy_success"], t.get("num_prompts", 128))
    lines = ["# Online policy distillation: held-out greedy success (128 problems)", ""]
    if t_succ:
        lines.append(f"Teacher ({teacher}): {t_succ[0]:.3f} +- {se(*t_succ):.3f}; 90% of it: {0.9 * t_succ[0]:.3f}.")
        lines.append("")
    steps = sorted({st for *_, d, _ in runs if os.path.exists(os.path.join(d, "metrics.jsonl"))
                    for st in read_run(d)[0]})
    lines.append("| student | arm | seed | " + " | ".join(f"step {st}" for st in steps) +
                 " | learner TFLOP | first step >= 90% teacher |")
    lines.append("|" + "---|" * (len(steps) + 5))
    curves = []
    agg = {}
    for student, arm, s, d, _ in runs:
        if not os.path.exists(os.path.join(d, "metrics.jsonl")):
            continue
        vals, gflop = read_run(d)
        cells = [f"{vals[st][0]:.3f} +- {se(*vals[st]):.3f}" if st in vals else "" for st in steps]
        reach = "not reached"
        if t_succ:
            hit = [st for st in steps if st in vals and vals[st][0] >= 0.9 * t_succ[0]]
            if hit:
                reach = f"{hit[0]} ({gflop.get(hit[0], float('nan')) / 1e3:.2f} TFLOP)"
        last = max(gflop)
        lines.append(f"| {student} | {arm} | {s} | " + " | ".join(cells) +
                     f" | {gflop[last] / 1e3:.2f} | {reach} |")
        for st in steps:
            if st in vals:
                curves.append(f"{student}_{arm}_s{s} {st} {gflop.get(st, float('nan')):.1f} {vals[st][0]:.4f} "
                              f"{se(*vals[st]):.4f}")
                agg.setdefault((student, arm, st), []).append(vals[st])
    lines += ["", "Mean over seeds (standard error over all seeds' problems, n = seeds x 128):", ""]
    lines.append("| student | arm | " + " | ".join(f"step {st}" for st in steps) + " |")
    lines.append("|" + "---|" * (len(steps) + 2))
    for student, arm in sorted({(k[0], k[1]) for k in agg}):
        cells = []
        for st in steps:
            v = agg.get((student, arm, st))
            if not v:
                cells.append("")
                continue
            n = sum(x[1] for x in v)
            p = sum(x[0] * x[1] for x in v) / n
            cells.append(f"{p:.3f} +- {se(p, n):.3f}")
        lines.append(f"| {student} | {arm} | " + " | ".join(cells) + " |")
    # Plot: mean over seeds per arm, against RL steps and against cumulative learner TFLOP.
    flops = {}
    for student, arm, s_, d, _ in runs:
        if os.path.exists(os.path.join(d, "metrics.jsonl")):
            vals, gflop = read_run(d)
            for st in vals:
                flops.setdefault((student, arm, st), []).append(gflop.get(st, float("nan")) / 1e3)
    blocks = []
    names = sorted({(k[0], k[1]) for k in agg})
    for student, arm in names:
        rows = []
        for st in steps:
            v = agg.get((student, arm, st))
            if v:
                n = sum(x[1] for x in v)
                p = sum(x[0] * x[1] for x in v) / n
                f = flops[(student, arm, st)]
                rows.append(f"{st} {sum(f) / len(f):.3f} {p:.4f} {se(p, n):.4f}")
        blocks.append(f"# {student} {arm}\n" + "\n".join(rows))
    open(os.path.join(a.out, "mean_curves.dat"), "w").write("\n\n\n".join(blocks) + "\n")
    plots = lambda xcol: ", ".join(
        f"'mean_curves.dat' index {i} using {xcol}:3:4 with yerrorlines title '{st} {arm}'"
        for i, (st, arm) in enumerate(names))
    teacher_line = f"{t_succ[0]:.4f} with lines dt 2 lc 'black' title 'teacher', " if t_succ else ""
    gp = ("set terminal pngcairo noenhanced size 1200,450\nset output 'opd_curves.png'\nset multiplot layout 1,2\n"
          "set key bottom right\nset ylabel 'held-out greedy success'\nset yrange [0:0.8]\n"
          f"set xlabel 'RL step'\nplot {teacher_line}{plots(1)}\n"
          f"set xlabel 'cumulative learner TFLOP'\nplot {teacher_line}{plots(2)}\nunset multiplot\n")
    open(os.path.join(a.out, "opd_curves.gp"), "w").write(gp)
    if subprocess.call(["sh", "-c", "command -v gnuplot >/dev/null"]) == 0:
        subprocess.call(["gnuplot", "opd_curves.gp"], cwd=a.out)
    open(os.path.join(a.out, "results.md"), "w").write("\n".join(lines) + "\n")
    open(os.path.join(a.out, "curves.dat"), "w").write(
        "# run step cumulative_learner_gflop greedy_success stderr\n" + "\n".join(curves) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
