#!/usr/bin/env python3
"""Gradient compression where bandwidth is short: 2 workers on a rate-limited link, float32 vs bfloat16 vs PowerSGD.

Two trainer processes (--strategy=multi_worker_mirrored, TCP collectives,
one intra-op thread each), one per network namespace joined by a veth pair
whose every end sends through tc's token bucket at the link's rate
(tools/bench/netns_hosts.py), train the same MLP on
the bundled digits (64 features, 10 classes, 20% held out; SGD lr 0.1,
global batch 64) with --gradient_compression=none, =bfloat16 and =powersgd
(rank 4, compressing from step 5 on: the measured steps are all
compressed), alternating for --rounds rounds. A model per link, large enough that the all-reduce
dominates the step:
  1 Gbit/s     MLP 64-4096-4096-4096-10 (33.9 M parameters, 136 MB of float32 gradients)
  100 Mbit/s   MLP 64-1024-1024-10 (1.1 M parameters, 4.5 MB)
Each run: --steps steps; the steady-state step time (per-step timestamps of
--metrics_out after --warmup steps), the whole run's training time and the
final test accuracy (time to accuracy: the same accuracy sooner). Each side's
best round counts; targets (issue 21): step time >= 1.7x faster with bfloat16
and >= 3x with PowerSGD rank 4 than float32, accuracy within 1 point.

Needs root, iproute2 (`ip netns`) and tc; the result says why it could not run.

  python3 tools/bench/compression_throughput.py [--quick] [--rounds=2]
      [--trainer=bazel-bin/tools/trainer] [--json_out=FILE]
"""
import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile

import netns_hosts
import peers_common as pc

LINKS = [  # rate, hidden, label
    ("1gbit", "4096,4096,4096", "1 Gbit/s"),
    ("100mbit", "1024,1024", "100 Mbit/s"),
]
BATCH = 64
COMPRESSIONS = [  # name, extra trainer flags, target speedup over float32
    ("none", [], None),
    ("bfloat16", [], 1.7),
    ("powersgd", ["--powersgd_rank=4", "--powersgd_start_step=5"], 3.0),
]
PORT = 24610


def run_pair(hosts, trainer, hidden, compression, extra, steps, warmup, tmp):
    """(seconds per step after the warm-up, seconds of the whole run, test accuracy)."""
    cluster = json.dumps({"worker": [f"{hosts.addr(i)}:{PORT}" for i in range(2)]})
    env = dict(os.environ, STRATA_JOB_TOKEN=secrets.token_hex(32))
    procs, metrics = [], []
    run_dir = tempfile.mkdtemp(dir=tmp)  # a fresh metrics file per run (the trainer appends)
    for i in range(2):
        m = os.path.join(run_dir, f"metrics_{i}.jsonl")
        metrics.append(m)
        cmd = hosts.exec(i, [trainer, "--strategy=multi_worker_mirrored", "--collective_transport=tcp",
                             "--model=mlp", f"--hidden={hidden}", "--data=digits",
                             "--optimizer=sgd", "--learning_rate=0.1", f"--global_batch_size={BATCH}",
                             f"--steps={steps}", "--intra_op_threads=1", "--prefetch=2", "--quiet",
                             f"--gradient_compression={compression}", "--heartbeat_timeout=30",
                             f"--metrics_out={m}"] + extra)
        env_i = dict(env, TF_CONFIG=json.dumps({"cluster": json.loads(cluster),
                                                "task": {"type": "worker", "index": i}}))
        procs.append(subprocess.Popen(cmd, env=env_i, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    errors = []
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=1200)
        if p.returncode != 0:
            errors.append(f"worker {i} exit {p.returncode}: " + " | ".join(err.strip().splitlines()[-4:]))
    if errors:
        raise RuntimeError("; ".join(errors))
    lines = [json.loads(l) for l in open(metrics[0])]
    per_step = [l for l in lines if "elapsed_sec" in l and "step" in l and "final" not in l]
    final = [l for l in lines if "final" in l or "test_accuracy" in l]
    a, b = per_step[warmup - 1], per_step[-1]
    step_s = (b["elapsed_sec"] - a["elapsed_sec"]) / (b["step"] - a["step"])
    accuracy = next((l["test_accuracy"] for l in reversed(final) if "test_accuracy" in l), float("nan"))
    return step_s, per_step[-1]["elapsed_sec"], accuracy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=0, help="alternating runs per side (default 2; --quick 1)")
    p.add_argument("--quick", action="store_true", help="fewer steps, one round")
    p.add_argument("--trainer", default=os.path.join(pc.ROOT, "bazel-bin/tools/trainer"))
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    a.rounds = a.rounds or (1 if a.quick else 2)
    steps, warmup = (40, 8) if a.quick else (60, 10)
    if not os.access(a.trainer, os.X_OK):
        sys.exit(f"{a.trainer} is not built (bazel build -c opt //tools:trainer)")
    why = netns_hosts.check()
    results = {"data": "digits", "batch": BATCH, "steps": steps, "warmup": warmup, "rounds": a.rounds,
               "targets": {c: t for c, _, t in COMPRESSIONS if t}, "results": [], "skipped": why or ""}
    if not why:
        with tempfile.TemporaryDirectory() as tmp:
            for rate, hidden, label in LINKS:
                best = {}
                with netns_hosts.NetnsHosts(2, rate=rate) as hosts:
                    for _ in range(a.rounds):
                        for compression, extra, _ in COMPRESSIONS:
                            r = run_pair(hosts, a.trainer, hidden, compression, extra, steps, warmup, tmp)
                            print(f"RESULT link={rate} compression={compression} step_s={r[0]:.4f} "
                                  f"run_s={r[1]:.2f} test_accuracy={r[2]:.4f}", flush=True)
                            if compression not in best or r[0] < best[compression][0]:
                                best[compression] = r
                f32 = best["none"]
                for compression, extra, target in COMPRESSIONS[1:]:
                    c = best[compression]
                    results["results"].append({
                        "link": label, "model": f"64-{hidden.replace(',', '-')}-10",
                        "compression": compression, "flags": " ".join(extra), "target": target,
                        "float32_step_s": f32[0], "step_s": c[0], "speedup": f32[0] / c[0],
                        "float32_run_s": f32[1], "run_s": c[1],
                        "float32_accuracy": f32[2], "accuracy": c[2]})
    print("\n| link | model | compression | float32 s/step | compressed s/step | speedup | "
          "accuracy float32 / compressed | training s float32 / compressed | target |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results["results"]:
        mark = "ok" if r["speedup"] >= r["target"] and abs(r["float32_accuracy"] - r["accuracy"]) <= 0.01 \
            else "BELOW"
        print(f"| {r['link']} | {r['model']} | {r['compression']} | {r['float32_step_s']:.3f} | "
              f"{r['step_s']:.3f} | {r['speedup']:.2f}x | {r['float32_accuracy']:.3f} / {r['accuracy']:.3f} | "
              f"{r['float32_run_s']:.1f} / {r['run_s']:.1f} | >= {r['target']}x {mark} |")
    if why:
        print(f"skipped: {why}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
