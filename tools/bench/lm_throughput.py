#!/usr/bin/env python3
"""Transformer LM training tokens/s: Strata (lm_bench) against PyTorch
(lm_torch.py, Debian's 1.13 with OpenBLAS) on 1 and 2 threads, the same
model, batch and steps, interleaved rounds; each side's median.
Issue 19's target: Strata >= 1.2x PyTorch on 1 and on 2 threads.

  python3 tools/bench/lm_throughput.py --lm_bench=bazel-bin/tools/lm_bench --json_out=lm.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peers_common as pc  # noqa: E402


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.strip()[-800:]}")
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RuntimeError(f"{cmd[0]} printed no result: {r.stdout.strip()[-400:]}")
    return json.loads(lines[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lm_bench", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    why = pc.check_torch()
    if why:
        sys.exit(f"lm_throughput: {why}")
    steps = max(5, a.steps // 2) if a.quick else a.steps
    model = ["--batch=16", "--seq=64", "--width=128", "--heads=4", "--blocks=2", "--vocab=96", f"--steps={steps}",
             "--warmup=3", "--rounds=1"]
    result = {"model": "2 blocks, width 128, 4 heads, seq 64, vocab 96, batch 16, Adam", "steps": steps,
              "rounds": a.rounds, "threads": {}}
    for threads in (1, 2):
        strata, torch = [], []
        for _ in range(a.rounds):
            strata.append(run_json([a.lm_bench, "--json", f"--threads={threads}"] + model)["tokens_per_sec"])
            torch.append(run_json([pc.TORCH_PYTHON, os.path.join(HERE, "lm_torch.py"), "--json",
                                   f"--threads={threads}"] + model, env=pc.torch_env(threads))["tokens_per_sec"])
        s, t = statistics.median(strata), statistics.median(torch)
        result["threads"][str(threads)] = {"strata_tokens_per_sec": s, "torch_tokens_per_sec": t, "ratio": s / t}
        print(f"{threads} thread(s): Strata {s:.0f} tokens/s, PyTorch {t:.0f}: {s / t:.2f}x (target >= 1.2x)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
