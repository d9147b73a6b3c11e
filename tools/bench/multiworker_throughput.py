#!/usr/bin/env python3
"""Multi-worker training throughput: Strata against PyTorch DDP and TensorFlow MWMS, side by side.

Every configuration trains the same model in one run (MLP 784-512-512-10,
SGD lr 0.1, global batch 256 split over the workers, synthetic data 784
features / 10 classes, the loss read back every step), alternating for
--rounds rounds; the best steady-state examples/s of each counts (the
machine is shared and noisy: compare within one run, by ratio):

  strata-mwms   bazel-bin/tools/launch --num_workers=2 -- bazel-bin/tools/trainer
                --strategy=multi_worker_mirrored --intra_op_threads=1
                (skipped with a line saying so until the trainer has the strategy)
  strata-1proc  tools/trainer --strategy=one_device --intra_op_threads=2
                (mirrored_throughput.run_strata: the same flags and measurement)
  ddp-gloo      tools/bench/ddp_train.py --workers=2 --threads=1 (PyTorch
                DistributedDataParallel over gloo on 127.0.0.1, OpenBLAS-openmp)
  torch-1proc   tools/bench/ddp_train.py --workers=1 --threads=2 (the same loop,
                one process on both cores)
  tf-mwms       tools/bench/tf_mwms_train.py --workers=2 (MultiWorkerMirroredStrategy,
                TF_CONFIG on 127.0.0.1 ports, 1 intra-op + 1 inter-op thread each)

--scaling adds each framework's 1 worker x 1 thread run, for scaling
efficiency (2-worker rate / twice the 1-worker rate). Targets (issue 5):
Strata 2 workers >= 1.5x DDP, >= 0.9x Strata's single process on 2 threads,
>= 1.5x TensorFlow MWMS. Each measurement is echoed as a RESULT line:

  RESULT impl=ddp-gloo workers=2 examples_per_s=17000

  tools/setup.sh --peers
  python3 tools/bench/multiworker_throughput.py [--quick] [--rounds=3] [--scaling]
      [--impls=strata-mwms,ddp-gloo,...] [--trainer=bazel-bin/tools/trainer]
      [--launch=bazel-bin/tools/launch] [--json_out=FILE]

To add a configuration, append a Config to configs() in main(): a function
returning examples/s (raising RuntimeError with the reason when it cannot run).
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

import mirrored_throughput as mt
import peers_common as pc
from engine_bench import table

Config = collections.namedtuple("Config", "impl workers threads label run")


def strata_multiworker(launch, trainer, workers, threads, steps, warmup, extra=()):
    """Strata's multi-worker trainer under tools/launch; examples/s after the warm-up.

    The rate comes from the per-step timestamps of --metrics_out, as
    mirrored_throughput measures the single-process trainer; where several
    workers write metrics (several files, or lines carrying a "task"), the
    slowest counts. `extra` flags follow the others (the last of a flag wins)."""
    for path, what in ((launch, "bazel build //tools:launch"), (trainer, "bazel build //tools:trainer")):
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"{path} is not built ({what})")
    helptext = subprocess.run([trainer, "--help"], capture_output=True, text=True).stdout
    if "multi_worker_mirrored" not in helptext:
        raise RuntimeError(f"{trainer} has no --strategy=multi_worker_mirrored yet")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [launch, f"--num_workers={workers}", "--", trainer,
               "--strategy=multi_worker_mirrored", "--model=mlp", f"--hidden={mt.HIDDEN}",
               f"--data=synthetic:{mt.EXAMPLES}:{mt.FEATURES}:{mt.CLASSES}", "--test_fraction=0",
               "--nostandardize", "--optimizer=sgd", "--learning_rate=0.1",
               f"--global_batch_size={mt.BATCH}", f"--steps={warmup + steps}", "--prefetch=2",
               f"--intra_op_threads={threads}", "--quiet",
               f"--metrics_out={os.path.join(tmp, 'metrics.jsonl')}"] + list(extra)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"launch exit {r.returncode}: " + " | ".join(r.stderr.strip().splitlines()[-6:]))
        series = collections.defaultdict(list)
        for path in glob.glob(os.path.join(tmp, "metrics*")):
            for line in open(path):
                rec = json.loads(line)
                if "final" not in rec:
                    series[(path, rec.get("task"))].append(rec)
    rates = []
    for recs in series.values():
        if len(recs) > warmup:
            a, b = recs[warmup - 1], recs[-1]
            rates.append((b["step"] - a["step"]) * mt.BATCH / (b["elapsed_sec"] - a["elapsed_sec"]))
    if not rates:
        raise RuntimeError(f"no per-step metrics after {warmup} warm-up steps in --metrics_out")
    return min(rates)


def strata_one_process(trainer, threads, steps, warmup):
    if not os.access(trainer, os.X_OK):
        raise RuntimeError(f"{trainer} is not built (bazel build //tools:trainer)")
    return mt.run_strata(trainer, ["--strategy=one_device", f"--intra_op_threads={threads}"],
                         steps, warmup)[0]


def torch_run(workers, threads, steps, warmup):
    why = pc.check_torch()
    if why:
        raise RuntimeError(why)
    cmd = [pc.TORCH_PYTHON, os.path.join(pc.BENCH_DIR, "ddp_train.py"), f"--workers={workers}",
           f"--threads={threads}", f"--steps={steps}", f"--warmup={warmup}"]
    return result_rate(cmd, pc.torch_env(threads))


def tf_run(tf_python, workers, threads, steps, warmup):
    if tf_python is None:
        raise RuntimeError("no python3 here imports tensorflow: run tools/setup.sh --peers "
                           "(pip install tensorflow-cpu)")
    cmd = [tf_python, os.path.join(pc.BENCH_DIR, "tf_mwms_train.py"), f"--workers={workers}",
           f"--intra_op_threads={threads}", f"--inter_op_threads={threads}",
           f"--steps={steps}", f"--warmup={warmup}"]
    return result_rate(cmd, dict(os.environ))


def result_rate(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=660)
    results = pc.parse_results(r.stdout)
    if r.returncode != 0 or not results:
        raise RuntimeError(f"exit {r.returncode}: " + " | ".join(r.stderr.strip().splitlines()[-6:]))
    return results[-1]["examples_per_s"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1 round of 150 timed steps")
    p.add_argument("--rounds", type=int, default=0,
                   help="alternating runs per configuration; the best counts (default 3; --quick 1)")
    p.add_argument("--steps", type=int, default=0, help="timed steps per run (default 300; --quick 150)")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--scaling", action="store_true", help="also 1 worker x 1 thread per framework")
    p.add_argument("--trainer", default=os.path.join(pc.ROOT, "bazel-bin/tools/trainer"))
    p.add_argument("--launch", default=os.path.join(pc.ROOT, "bazel-bin/tools/launch"))
    p.add_argument("--impls", default="", help="only these, comma-separated (default: all)")
    p.add_argument("--json_out", default="", help="also write every result to this JSON file")
    a = p.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.steps = a.steps or (150 if a.quick else 300)
    tf_python = pc.find_tf_python()
    s, w = a.steps, a.warmup

    configs = [
        Config("strata-mwms", 2, 1, "Strata MultiWorkerMirrored, 2 workers x 1 thread",
               lambda: strata_multiworker(a.launch, a.trainer, 2, 1, s, w)),
        Config("strata-1proc", 1, 2, "Strata one process, 2 threads",
               lambda: strata_one_process(a.trainer, 2, s, w)),
        Config("ddp-gloo", 2, 1, "PyTorch DDP (gloo), 2 processes x 1 thread",
               lambda: torch_run(2, 1, s, w)),
        Config("torch-1proc", 1, 2, "PyTorch one process, 2 threads", lambda: torch_run(1, 2, s, w)),
        Config("tf-mwms", 2, 1, "TensorFlow MultiWorkerMirrored, 2 workers x 1 thread",
               lambda: tf_run(tf_python, 2, 1, s, w)),
    ]
    if a.scaling:
        configs += [
            Config("strata-mwms", 1, 1, "Strata MultiWorkerMirrored, 1 worker x 1 thread",
                   lambda: strata_multiworker(a.launch, a.trainer, 1, 1, s, w)),
            Config("torch-1proc", 1, 1, "PyTorch one process, 1 thread", lambda: torch_run(1, 1, s, w)),
            Config("tf-mwms", 1, 1, "TensorFlow MultiWorkerMirrored, 1 worker x 1 thread",
                   lambda: tf_run(tf_python, 1, 1, s, w)),
        ]

    if a.impls:
        wanted = set(a.impls.split(","))
        unknown = wanted - {c.impl for c in configs}
        if unknown:
            sys.exit(f"multiworker_throughput: unknown --impls {sorted(unknown)}")
        configs = [c for c in configs if c.impl in wanted]
    best, skipped = {}, {}
    for rnd in range(a.rounds):
        for c in configs:
            key = (c.impl, c.workers, c.threads)
            if key in skipped:
                continue
            try:
                rate = c.run()
            except (RuntimeError, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
                skipped[key] = str(e).strip()
                print(f"SKIP {c.impl} workers={c.workers}: {skipped[key]}", flush=True)
                continue
            print(f"round {rnd + 1}: {pc.train_result(c.impl, c.workers, rate)} threads={c.threads}",
                  flush=True)
            best[key] = max(best.get(key, 0.0), rate)

    print(f"\nMLP 784-512-512-10, SGD lr 0.1, global batch {mt.BATCH}, synthetic data; "
          f"examples/s: best of {a.rounds} alternating round(s) of {s} timed steps after {w}")
    rows = [[c.label, c.impl, str(c.workers), str(c.threads), f"{best[(c.impl, c.workers, c.threads)]:,.0f}"]
            for c in configs if (c.impl, c.workers, c.threads) in best]
    print("(in ratios, (W x T) is workers x threads per worker)")
    table("multi-worker training throughput", ["configuration", "impl", "workers", "threads/worker",
                                               "examples/s"], rows)

    def rate(impl, workers, threads):
        return best.get((impl, workers, threads))

    ratio_rows = []
    for num, den, target in ((("strata-mwms", 2, 1), ("ddp-gloo", 2, 1), 1.5),
                             (("strata-mwms", 2, 1), ("strata-1proc", 1, 2), 0.9),
                             (("strata-mwms", 2, 1), ("tf-mwms", 2, 1), 1.5),
                             (("ddp-gloo", 2, 1), ("torch-1proc", 1, 2), None),
                             (("tf-mwms", 2, 1), ("ddp-gloo", 2, 1), None)):
        x, y = rate(*num), rate(*den)
        if x and y:
            mark = "" if target is None else f">= {target}x {'ok' if x / y >= target else 'BELOW'}"
            ratio_rows.append([f"{num[0]} ({num[1]}x{num[2]}) / {den[0]} ({den[1]}x{den[2]})",
                               f"{x / y:.2f}x", mark or "(peer vs peer)"])
    for impl in ("strata-mwms", "torch-1proc", "tf-mwms"):
        one, two = rate(impl, 1, 1), rate({"torch-1proc": "ddp-gloo"}.get(impl, impl), 2, 1)
        if one and two:
            ratio_rows.append([f"{impl}: scaling efficiency 2 workers / (2 x 1 worker)",
                               f"{two / (2 * one):.2f}", ""])
    if ratio_rows:
        table("ratios (examples/s)", ["ratio", "value", "target"], ratio_rows)
    print("\n" + pc.load_note())
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"rounds": a.rounds, "steps": s, "warmup": w,
                       "results": [{"impl": k[0], "workers": k[1], "threads": k[2], "examples_per_s": v}
                                   for k, v in best.items()],
                       "skipped": [{"impl": k[0], "workers": k[1], "threads": k[2], "why": v}
                                   for k, v in skipped.items()]}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
