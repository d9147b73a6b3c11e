#!/usr/bin/env python3
"""Mirrored training throughput: Strata against itself on one device and against TensorFlow.

Three configurations train the same model side by side in one run (MLP
784-512-512-10, SGD lr 0.1, global batch 256, synthetic data 784 features /
10 classes), alternating for several rounds; the best steady-state
examples/s of each counts (the machine is shared and noisy, so compare
within one run, by ratio):

  strata mirrored x2   tools/trainer --strategy=mirrored --num_cpu_devices=2
                       --intra_op_threads=1 (one thread per device, one
                       inter-op thread per replica)
  strata one device    tools/trainer --intra_op_threads=2 (both cores on one
                       device, ops one at a time)
  tensorflow mirrored  tools/bench/tf_mirrored_train.py: tf.distribute.
                       MirroredStrategy(["/cpu:0", "/cpu:1"]) over 2 logical
                       CPU devices, tf.function step with strategy.run,
                       intra-op 2 and inter-op 2 threads (the same 2 cores)

Targets: Strata mirrored >= 0.9x Strata one device, >= 1.5x TensorFlow.

Steady state: the steps after a warm-up, from the per-step timestamps of
--metrics_out for Strata and a wall clock around the timed loop for
TensorFlow. Both read the loss back every step and prepare input ahead on a
background thread (Strata's --prefetch=2, the trainer's default;
TensorFlow's tf.data prefetch(2)); every other setting is each framework's
default (Strata: gradients all-reduced in one bucket of at most 25 MiB, the
ring all-reduce; TensorFlow: its CollectiveAllReduce cross-device ops).
Effective GFLOP/s counts the model's matrix products: forward, the weight
gradients and the input gradients of every layer but the first. CPU ms/step
(all threads of the process, the median over rounds) is the work a step
costs, which other load on the machine changes far less than the wall
clock: for Strata the CPU time of a run of warm-up + timed steps minus that
of a run of the warm-up steps alone, for TensorFlow the process's CPU time
over the timed loop.

  python3 tools/bench/mirrored_throughput.py [--rounds=3] [--trainer=bazel-bin/tools/trainer]
      [--quick] [--json_out=FILE]

--quick: one round of 150 timed steps (--rounds and --steps win when given).
--json_out writes the table's figures and ratios to a JSON file.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FEATURES, HIDDEN, CLASSES, EXAMPLES, BATCH = 784, "512,512", 10, 16384, 256


def flops_per_example():
    sizes = [FEATURES] + [int(h) for h in HIDDEN.split(",")] + [CLASSES]
    total = 0
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        total += 2 * a * b * (2 if i == 0 else 3)
    return total


def child_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_strata_once(trainer, extra, total_steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [trainer, "--model=mlp", f"--hidden={HIDDEN}",
               f"--data=synthetic:{EXAMPLES}:{FEATURES}:{CLASSES}", "--test_fraction=0",
               "--nostandardize", "--optimizer=sgd", "--learning_rate=0.1",
               f"--global_batch_size={BATCH}", f"--steps={total_steps}", "--prefetch=2",
               "--quiet", f"--metrics_out={metrics}"] + extra
        c0 = child_cpu_seconds()
        subprocess.run(cmd, check=True)
        cpu = child_cpu_seconds() - c0
        lines = [json.loads(l) for l in open(metrics)]
    return [l for l in lines if "final" not in l], cpu


def run_strata(trainer, extra, steps, warmup):
    """(examples/s, CPU ms per step) of the steps after the warm-up.

    The CPU time of a step is the difference between a run of warmup+steps
    steps and one of warmup steps (start-up and data generation cancel)."""
    per_step, cpu_long = run_strata_once(trainer, extra, warmup + steps)
    _, cpu_short = run_strata_once(trainer, extra, warmup)
    a, b = per_step[warmup - 1], per_step[-1]
    rate = (b["step"] - a["step"]) * BATCH / (b["elapsed_sec"] - a["elapsed_sec"])
    return rate, 1000 * (cpu_long - cpu_short) / steps


def run_tf(steps, warmup):
    cmd = [sys.executable, os.path.join(ROOT, "tools/bench/tf_mirrored_train.py"), "--devices=2",
           f"--features={FEATURES}", f"--hidden={HIDDEN}", f"--classes={CLASSES}",
           f"--examples={EXAMPLES}", f"--batch={BATCH}", "--learning_rate=0.1",
           "--intra_op_threads=2", "--inter_op_threads=2", f"--steps={steps}", f"--warmup={warmup}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["examples_per_sec"], r["cpu_ms_per_step"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=0,
                   help="alternating runs per configuration; the best counts (default 3; --quick 1)")
    p.add_argument("--steps", type=int, default=0, help="timed steps per run (default 300; --quick 150)")
    p.add_argument("--quick", action="store_true", help="one round of 150 timed steps")
    p.add_argument("--json_out", default="", help="also write the table's figures to this JSON file")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--trainer", default="", help="the trainer binary (default: bazel build it)")
    a = p.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 3)
    a.steps = a.steps or (150 if a.quick else 300)
    try:
        import tensorflow  # noqa: F401  (only checks that the peer can run)
    except ImportError:
        sys.exit(f"{sys.executable} cannot import tensorflow: pip install tensorflow-cpu")
    trainer = a.trainer
    if not trainer:
        subprocess.run(["bazel", "build", "-c", "opt", "//tools:trainer"], cwd=ROOT, check=True)
        trainer = os.path.join(ROOT, "bazel-bin/tools/trainer")

    configs = [
        ("strata mirrored x2 (1 thread/device)",
         lambda: run_strata(trainer, ["--strategy=mirrored", "--num_cpu_devices=2", "--intra_op_threads=1"],
                            a.steps, a.warmup)),
        ("strata one device (2 threads)",
         lambda: run_strata(trainer, ["--strategy=one_device", "--intra_op_threads=2"], a.steps, a.warmup)),
        ("tensorflow mirrored x2 (2 logical CPUs)", lambda: run_tf(a.steps, a.warmup)),
    ]
    best = {name: 0.0 for name, _ in configs}
    cpu = {name: [] for name, _ in configs}
    for r in range(a.rounds):
        for name, fn in configs:
            rate, cpu_ms = fn()
            print(f"round {r + 1}: {name}: {rate:,.0f} examples/s, {cpu_ms:.2f} CPU ms/step", flush=True)
            best[name] = max(best[name], rate)
            cpu[name].append(cpu_ms)

    fpe = flops_per_example()
    med = {name: statistics.median(v) for name, v in cpu.items()}
    names = [name for name, _ in configs]
    print(f"\nMLP 784-512-512-10, SGD, global batch {BATCH}; examples/s: best of {a.rounds} "
          "alternating rounds; CPU ms/step (all threads): median\n")
    print("| configuration | examples/s | effective GFLOP/s | CPU ms/step |")
    print("| --- | --- | --- | --- |")
    for name in names:
        print(f"| {name} | {best[name]:,.0f} | {best[name] * fpe / 1e9:.0f} | {med[name]:.2f} |")
    mirrored, one, tf = names
    ratios = []
    for label, a_, b_, target in (("Strata mirrored / Strata one device", mirrored, one, 0.9),
                                  ("Strata mirrored / TensorFlow mirrored", mirrored, tf, 1.5)):
        ratio = best[a_] / best[b_]
        mark = "ok" if ratio >= target else "BELOW"
        ratios.append({"ratio": label, "value": ratio, "target": target, "met": ratio >= target,
                       "cpu_per_step_ratio": med[b_] / med[a_]})
        print(f"\n{label}: {ratio:.2f}x examples/s (target >= {target}x: {mark}); "
              f"{med[b_] / med[a_]:.2f}x less CPU per step", end="")
    print()
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"rounds": a.rounds, "steps": a.steps, "warmup": a.warmup, "batch": BATCH,
                       "results": [{"configuration": n, "examples_per_s": best[n],
                                    "effective_gflops": best[n] * fpe / 1e9, "cpu_ms_per_step": med[n]}
                                   for n in names],
                       "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    main()
