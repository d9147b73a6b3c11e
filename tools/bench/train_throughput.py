#!/usr/bin/python3
"""Training throughput: Strata's trainer against PyTorch, side by side.

Runs tools/trainer (synthetic data, --metrics_out) and tools/bench/torch_train.py
on the same MLP, optimizer, batch and thread count, alternating the two for
several rounds, and prints a table of the best examples/s of each and their
ratio. The machine is shared and noisy (readings move 20-25% between runs),
so compare within one run, by ratio.

Workloads (SGD lr 0.1 by default):
  compute-bound  MLP 784-512-512-10, batch 256, 1 and 2 threads  (target >= 1.0x)
  overhead-bound MLP 64-128-10 (the digits model), batch 64, 1 thread  (target >= 2x)

Fairness: PyTorch uses OpenBLAS-openmp (Debian's default reference BLAS is
~20x slower), Debian's /usr/bin/python3, and set_num_threads(T) with one
inter-op thread; Strata runs --intra_op_threads=T --inter_op_threads=0 (ops
one at a time on the calling thread) --prefetch=0 (batches made on the
training thread, as the PyTorch loop does), and both read the loss back every
step. Throughput is measured after a warm-up, from the per-step timestamps of
--metrics_out for Strata and a wall clock around the loop for PyTorch.

  tools/setup.sh --bench                      # python3-torch, libopenblas0-openmp
  /usr/bin/python3 tools/bench/train_throughput.py [--rounds=3] [--optimizer=sgd]
      [--quick] [--json_out=FILE]

--quick: one round (--rounds wins when given) of half as many steps.
--json_out writes the table's figures, with the targets, to a JSON file.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

PYTHON = pc.TORCH_PYTHON

# name, features, hidden, classes, examples, batch, threads, steps, warmup, target
WORKLOADS = [
    ("mlp 784-512-512-10", 784, "512,512", 10, 16384, 256, 1, 330, 30, 1.0),
    ("mlp 784-512-512-10", 784, "512,512", 10, 16384, 256, 2, 330, 30, 1.0),
    ("digits mlp 64-128-10", 64, "128", 10, 1438, 64, 1, 20000, 2000, 2.0),
]


def run_strata(trainer, w, optimizer, lr):
    name, features, hidden, classes, examples, batch, threads, steps, warmup, _ = w
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [trainer, "--model=mlp", f"--hidden={hidden}",
               f"--data=synthetic:{examples}:{features}:{classes}", "--test_fraction=0",
               "--nostandardize", f"--optimizer={optimizer}", f"--global_batch_size={batch}",
               f"--steps={warmup + steps}", f"--intra_op_threads={threads}",
               "--inter_op_threads=0", "--prefetch=0", "--quiet", f"--metrics_out={metrics}"]
        if lr:
            cmd.append(f"--learning_rate={lr}")
        subprocess.run(cmd, check=True)
        lines = [json.loads(l) for l in open(metrics)]
    per_step = [l for l in lines if "elapsed_sec" in l]  # step lines (not epoch or final ones)
    a, b = per_step[warmup - 1], per_step[-1]
    return (b["step"] - a["step"]) * batch / (b["elapsed_sec"] - a["elapsed_sec"])


def run_torch(w, optimizer, lr):
    name, features, hidden, classes, examples, batch, threads, steps, warmup, _ = w
    env = pc.torch_env(threads)  # OpenBLAS-openmp with its best kernels
    cmd = [PYTHON, os.path.join(ROOT, "tools/bench/torch_train.py"), f"--features={features}",
           f"--hidden={hidden}", f"--classes={classes}", f"--examples={examples}",
           f"--batch={batch}", f"--threads={threads}", f"--steps={steps}", f"--warmup={warmup}",
           f"--optimizer={optimizer}"]
    if lr:
        cmd.append(f"--learning_rate={lr}")
    out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["examples_per_sec"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=0,
                   help="alternating runs per side; the best counts (default 3; --quick 1)")
    p.add_argument("--quick", action="store_true", help="one round of half as many steps")
    p.add_argument("--json_out", default="", help="also write the table's figures to this JSON file")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="sgd")
    p.add_argument("--learning_rate", type=float, default=0.0, help="0: each side's default")
    p.add_argument("--trainer", default="", help="the trainer binary (default: bazel build it)")
    a = p.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 3)

    if not os.path.isdir(pc.OPENBLAS):
        sys.exit(f"{pc.OPENBLAS} is missing: run tools/setup.sh --bench (libopenblas0-openmp)")
    probe = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        sys.exit(f"{PYTHON} cannot import torch: run tools/setup.sh --bench (python3-torch)")
    trainer = a.trainer
    if not trainer:
        subprocess.run(["bazel", "build", "-c", "opt", "//tools:trainer"], cwd=ROOT, check=True)
        trainer = os.path.join(ROOT, "bazel-bin/tools/trainer")

    print(f"optimizer {a.optimizer}, best of {a.rounds} alternating rounds per side\n")
    workloads = WORKLOADS
    if a.quick:  # steps and warm-up halved
        workloads = [w[:7] + (w[7] // 2, w[8] // 2) + w[9:] for w in WORKLOADS]
    rows = []
    for w in workloads:
        best_s, best_t = 0.0, 0.0
        for _ in range(a.rounds):
            best_s = max(best_s, run_strata(trainer, w, a.optimizer, a.learning_rate))
            best_t = max(best_t, run_torch(w, a.optimizer, a.learning_rate))
        rows.append((w, best_s, best_t))

    print("| workload | batch | threads | Strata examples/s | PyTorch examples/s | Strata / PyTorch | target |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for w, s, t in rows:
        name, _, _, _, _, batch, threads, _, _, target = w
        ratio = s / t
        mark = "ok" if ratio >= target else "BELOW"
        print(f"| {name} | {batch} | {threads} | {s:,.0f} | {t:,.0f} | {ratio:.2f}x | >= {target:.1f}x {mark} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"optimizer": a.optimizer, "rounds": a.rounds, "results": [
                {"workload": w[0], "batch": w[5], "threads": w[6], "strata_examples_per_s": s,
                 "pytorch_examples_per_s": t, "ratio": s / t, "target": w[9], "met": s / t >= w[9]}
                for w, s, t in rows]}, f, indent=1)


if __name__ == "__main__":
    main()
