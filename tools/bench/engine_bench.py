#!/usr/bin/env python3
"""Engine benchmarks against their peers, side by side in one run.

Builds and runs, in one go:
  1. executor overhead per node (1,000-op chain and wide graphs through
     Session::Run) against libtorch's per-op cost on the same chain;
  2. MatMul 512x512x512 float32 on 1 and 2 threads against Eigen called
     directly and OpenBLAS sgemm;
  3. Session::Run of a cached MLP forward (784-512-512-10, batch 256) against
     the same math written directly with Eigen.
and prints one table per benchmark with the ratio and the target.

    tools/setup.sh --bench && python3 tools/bench/engine_bench.py [--min_time=1]
        [--quick] [--no_build] [--bin_dir=DIR] [--json_out=FILE]

--quick: 0.1 s per benchmark and repetition instead of 0.5 s. --no_build
runs the binaries already under --bin_dir (default bazel-bin; the suite,
tools/perf.sh, builds once and copies them aside). --json_out writes every
figure of the tables, with the targets, to a JSON file.

Each figure is the median of 5 repetitions, run in random order with the
other benchmarks of the same binary. The machine is noisy: compare ratios
within one run, not absolute times across runs.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["//runtime:executor_bench", "//runtime:torch_op_bench",
           "//kernels/cpu:matmul_bench", "//runtime:mlp_forward_bench"]


def bench_path(bin_dir, target):
    """Where a bench target's binary is under bin_dir (bazel-bin's layout, or flat)."""
    nested = os.path.join(bin_dir, target[2:].replace(":", "/"))
    return nested if os.path.exists(nested) else os.path.join(bin_dir, target.split(":")[-1])


def run_bench(target, min_time, extra_env=None, bench_filter=None, bin_dir=None):
    path = bench_path(bin_dir or os.path.join(ROOT, "bazel-bin"), target)
    # Repetitions in random order: a burst of other load on this shared machine then
    # hits Strata's and the peer's runs alike instead of one side's block of runs.
    cmd = [path, "--benchmark_format=json", f"--benchmark_min_time={min_time}",
           "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true",
           "--benchmark_enable_random_interleaving=true"]
    if bench_filter:
        cmd.append(f"--benchmark_filter={bench_filter}")
    env = dict(os.environ)
    env.update(extra_env or {})
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    results = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            results[b["run_name"]] = b
    return results


def ns(b):
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def table(title, header, rows):
    print(f"\n## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min_time", default="", help="seconds per benchmark (default 0.5; --quick 0.1)")
    ap.add_argument("--quick", action="store_true", help="0.1 s per benchmark and repetition")
    ap.add_argument("--no_build", action="store_true", help="do not run bazel build first")
    ap.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"),
                    help="where the bench binaries are (bazel-bin's layout, or all in one folder)")
    ap.add_argument("--json_out", default="", help="also write the tables' figures to this JSON file")
    args = ap.parse_args()
    args.min_time = args.min_time or ("0.1" if args.quick else "0.5")
    if not args.no_build:
        subprocess.run(["bazel", "build", "-c", "opt"] + TARGETS, cwd=ROOT, check=True)
    omp = {"OMP_NUM_THREADS": "1"}
    out = {"min_time": float(args.min_time), "executor": [], "matmul": [], "mlp_forward": []}

    # 1. Executor overhead vs libtorch per-op cost.
    strata = run_bench("//runtime:executor_bench", args.min_time, bench_filter="Session",
                       bin_dir=args.bin_dir)
    torch = run_bench("//runtime:torch_op_bench", args.min_time, extra_env=omp, bin_dir=args.bin_dir)
    torch_chain = ns(torch["BM_TorchChainAdd"]) / 1000
    torch_wide = ns(torch["BM_TorchWideAdd"]) / 1000
    rows = []
    for name, label, ref in [("BM_SessionChainAddV2", "chain of 1,000 AddV2", torch_chain),
                             ("BM_SessionWideAddV2", "wide, 1,000 AddV2", torch_wide)]:
        per = ns(strata[name]) / 1000
        out["executor"].append({"graph": label, "strata_ns_per_node": per, "libtorch_ns_per_op": ref,
                                "ratio": per / ref, "target": "<= 0.5x", "met": per / ref <= 0.5})
        rows.append([label, f"{per:.0f} ns", f"{ref:.0f} ns", f"{per / ref:.2f}x",
                     "<= 0.5x", "met" if per / ref <= 0.5 else "NOT met"])
    table("Executor overhead per node (Session::Run, cached plan) vs libtorch torch::add",
          ["graph", "Strata per node", "libtorch per op", "ratio", "target", ""], rows)

    # 2. MatMul 512^3.
    mm = run_bench("//kernels/cpu:matmul_bench", args.min_time, bench_filter="/512/",
                   bin_dir=args.bin_dir)
    rows = []
    for threads in (1, 2):
        def gflops(name):
            b = mm.get(f"{name}/512/{threads}/real_time")
            return b["GFLOP/s"] if b else None
        s = gflops("BM_StrataMatMul")
        peers = {"Eigen product": gflops("BM_EigenMatrixProduct"),
                 "Eigen contraction": gflops("BM_EigenContraction"),
                 "OpenBLAS sgemm": gflops("BM_OpenBlasSgemm")}
        best_name, best = max(((k, v) for k, v in peers.items() if v), key=lambda kv: kv[1])
        out["matmul"].append({"threads": threads, "strata_gflops": s, "peers_gflops": peers,
                              "best_peer": best_name, "ratio": s / best, "target": ">= 0.90x",
                              "met": s / best >= 0.9})
        rows.append([str(threads), f"{s:.0f}"] +
                    [f"{v:.0f}" if v else "-" for v in peers.values()] +
                    [f"{s / best:.2f}x of {best_name}", ">= 0.90x",
                     "met" if s / best >= 0.9 else "NOT met"])
    table("MatMul 512x512x512 float32, GFLOP/s",
          ["threads", "Strata", "Eigen product", "Eigen contraction", "OpenBLAS", "ratio", "target", ""],
          rows)

    # 3. Cached MLP forward vs Eigen.
    mlp = run_bench("//runtime:mlp_forward_bench", args.min_time, bin_dir=args.bin_dir)
    rows = []
    for threads in (1, 2):
        s = ns(mlp[f"BM_StrataSession/{threads}/real_time"])
        e = ns(mlp[f"BM_EigenDirect/{threads}/real_time"])
        out["mlp_forward"].append({"threads": threads, "strata_us": s / 1e3, "eigen_us": e / 1e3,
                                   "ratio": s / e, "target": "<= 1.05x", "met": s / e <= 1.05})
        rows.append([str(threads), f"{s / 1e3:.0f} us", f"{e / 1e3:.0f} us", f"{s / e:.3f}x",
                     "<= 1.05x", "met" if s / e <= 1.05 else "NOT met"])
    table("MLP forward 784-512-512-10, batch 256: Session::Run vs Eigen directly",
          ["threads", "Strata", "Eigen", "ratio", "target", ""], rows)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
