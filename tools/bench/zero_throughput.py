#!/usr/bin/env python3
"""ZeRO stage 1's step time: the trainer with --zero_stage=1 against the same run with 0.

The model of the multi-worker benchmarks (MLP 784-512-512-10, global batch
256, synthetic data 784 features / 10 classes, the loss read back every
step), with Adam (lr 1e-3), whose two slots per parameter are what stage 1
shards. Each configuration runs mirrored optimizer state (--zero_stage=0)
and sharded (--zero_stage=1) alternately for --rounds rounds; the best
steady-state examples/s of each side counts, and the ratio sharded /
mirrored is the figure (target, issue 21: >= 0.95):
  mirrored x2   tools/trainer --strategy=mirrored --num_cpu_devices=2 --intra_op_threads=1
  mirrored x4   the same with 4 virtual CPU devices (on 2 cores)
  2 workers     tools/launch --num_workers=2 -- tools/trainer
                --strategy=multi_worker_mirrored --intra_op_threads=1

  python3 tools/bench/zero_throughput.py [--quick] [--rounds=3]
      [--trainer=bazel-bin/tools/trainer] [--launch=bazel-bin/tools/launch] [--json_out=FILE]
"""
import argparse
import json
import os
import sys

import mirrored_throughput as mt
import multiworker_throughput as mw
import peers_common as pc

ADAM = ["--optimizer=adam", "--learning_rate=0.001"]
TARGET = 0.95


def configs(a):
    def mirrored(devices):
        return lambda zero, steps, warmup: mt.run_strata(
            a.trainer, ["--strategy=mirrored", f"--num_cpu_devices={devices}", "--intra_op_threads=1"]
            + ADAM + [f"--zero_stage={zero}"], steps, warmup)[0]

    def workers(zero, steps, warmup):
        return mw.strata_multiworker(a.launch, a.trainer, 2, 1, steps, warmup,
                                     ADAM + [f"--zero_stage={zero}"])
    return [("mirrored x2", mirrored(2)), ("mirrored x4", mirrored(4)), ("2 workers", workers)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=0, help="alternating runs per side (default 3; --quick 2)")
    p.add_argument("--quick", action="store_true", help="fewer steps")
    p.add_argument("--trainer", default=os.path.join(pc.ROOT, "bazel-bin/tools/trainer"))
    p.add_argument("--launch", default=os.path.join(pc.ROOT, "bazel-bin/tools/launch"))
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    a.rounds = a.rounds or (2 if a.quick else 3)
    steps, warmup = (120, 20) if a.quick else (300, 30)
    for path in (a.trainer, a.launch):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is not built (bazel build -c opt //tools:trainer //tools:launch)")
    rows = []
    for name, run in configs(a):
        best = {0: 0.0, 1: 0.0}
        for _ in range(a.rounds):
            for zero in (0, 1):
                rate = run(zero, steps, warmup)
                print(f"RESULT config={name.replace(' ', '_')} zero_stage={zero} examples_per_s={rate:.0f}",
                      flush=True)
                best[zero] = max(best[zero], rate)
        rows.append({"config": name, "mirrored_examples_per_s": best[0], "sharded_examples_per_s": best[1],
                     "ratio": best[1] / best[0] if best[0] > 0 else 0.0})
    print("\n| configuration | zero_stage 0 examples/s | zero_stage 1 examples/s | 1 / 0 | target |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        mark = "ok" if r["ratio"] >= TARGET else "BELOW"
        print(f"| {r['config']} | {r['mirrored_examples_per_s']:,.0f} | {r['sharded_examples_per_s']:,.0f} | "
              f"{r['ratio']:.3f}x | >= {TARGET} {mark} |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"model": "784-512-512-10", "batch": mt.BATCH, "optimizer": "adam", "rounds": a.rounds,
                       "steps": steps, "target": TARGET, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
