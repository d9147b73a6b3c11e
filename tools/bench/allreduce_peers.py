#!/usr/bin/env python3
"""Cross-process all-reduce: Strata against Open MPI, Gloo and PyTorch's gloo, side by side.

One run measures, on this host, float32 SUM all-reduce between 2 and 4
processes for 4 KiB to 64 MiB (x4), every implementation with the same
sizes and iteration schedule (peers_common: warm-up, barrier, timed loop,
the slowest rank's mean; bus bandwidth = algbw x 2(n-1)/n):

  mpi-shm     Open MPI 4.1, MPI_Allreduce over shared memory
              (--mca pml ob1 --mca btl self,vader)      tools/bench/allreduce_mpi.c
  mpi-tcp     the same over loopback TCP
              (--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  gloo        Gloo C++ (libgloo-dev) gloo::allreduce, TCP device on 127.0.0.1,
              FileStore rendezvous                       tools/bench/allreduce_gloo.cc
  torch-gloo  PyTorch 1.13 torch.distributed.all_reduce, gloo backend
                                                         tools/bench/allreduce_torch_gloo.py
  strata-shm  bazel-bin/runtime/collective/cross_process_bench --transport=shm (the same
              schedule flags)
  strata-tcp  ... --transport=tcp (each skipped with a line saying why until it runs)

plus this machine's memcpy bandwidth (1 and 2 threads; tools/bench/memcpy_bw.c)
as the physical limit for same-host collectives. The C and C++ peers are
compiled here, with mpicc and g++, into a temporary directory. Every
measurement is echoed as a RESULT line as it arrives; then one table per
rank count: bus bandwidth (and time) per implementation and size, and the
ratio Strata / peer of bus bandwidth (higher is better for Strata). The
machine is shared and noisy: compare within one run, by ratio.

  tools/setup.sh --peers
  python3 tools/bench/allreduce_peers.py [--quick] [--ranks=2,4] [--strata=auto|PATH|none]
      [--rounds=R] [--impls=mpi-shm,gloo,...] [--json_out=FILE]

--quick (under a minute here) spends 128 MiB of traffic per size, at most
300 iterations, one round; the full mode 1 GiB, at most 2000, and the
fastest of 3 alternating rounds (the machine's other load comes and goes).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import peers_common as pc
from engine_bench import table

PEERS = ["mpi-shm", "mpi-tcp", "gloo", "torch-gloo"]
STRATA = ["strata-shm", "strata-tcp"]
STRATA_DEFAULT = os.path.join(pc.ROOT, "bazel-bin/runtime/collective/cross_process_bench")
# Strata / peer ratios shown, and the target for the 2-process case at >= 1 MiB.
RATIOS = [("strata-shm", "mpi-shm", 1.0), ("strata-tcp", "mpi-tcp", 1.0), ("strata-tcp", "gloo", 3.0)]
MPI_TRANSPORT = {
    "mpi-shm": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
    "mpi-tcp": ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"],
}


def build(tmp):
    """Compiles the native peers; returns {name: path or the reason it cannot run}."""
    out = {}
    sources = {
        "mpi": (["mpicc", "-O2", "-o"], "allreduce_mpi.c", []),
        "gloo": (["g++", "-O2", "-std=c++17", "-o"], "allreduce_gloo.cc", ["-lgloo", "-pthread"]),
        "memcpy": (["cc", "-O2", "-pthread", "-o"], "memcpy_bw.c", []),
    }
    for name, (compiler, src, libs) in sources.items():
        if shutil.which(compiler[0]) is None:
            out[name] = f"{compiler[0]} not found (tools/setup.sh --peers)"
            continue
        exe = os.path.join(tmp, name)
        r = subprocess.run(compiler + [exe, os.path.join(pc.BENCH_DIR, src)] + libs,
                           capture_output=True, text=True)
        out[name] = exe if r.returncode == 0 else (
            f"{src} does not compile (tools/setup.sh --peers installs libopenmpi-dev, libgloo-dev): "
            + " ".join(r.stderr.strip().splitlines()[-2:]))
    return out


def run_impl(impl, ranks, schedule, exes, strata, strata_args, tmp):
    """RESULT dicts of one implementation at one rank count; raises RuntimeError with why not."""
    flags = pc.schedule_flags(schedule)
    if impl.startswith("mpi-"):
        if not os.path.isfile(exes["mpi"]):
            raise RuntimeError(exes["mpi"])
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        cmd = (["mpirun"] + root + ["--oversubscribe", "-np", str(ranks)] + MPI_TRANSPORT[impl]
               + [exes["mpi"], f"--impl={impl}"] + flags)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"mpirun exit {r.returncode}: {r.stderr.strip()[-500:]}")
        return pc.parse_results(r.stdout)
    if impl == "gloo":
        if not os.path.isfile(exes["gloo"]):
            raise RuntimeError(exes["gloo"])
        store = tempfile.mkdtemp(dir=tmp)
        cmds = [[exes["gloo"], f"--rank={r}", f"--size={ranks}", f"--store={store}"] + flags
                for r in range(ranks)]
        return pc.parse_results(pc.run_ranks(cmds, timeout=600)[0])
    if impl == "torch-gloo":
        why = pc.check_torch()
        if why:
            raise RuntimeError(why)
        cmd = [pc.TORCH_PYTHON, os.path.join(pc.BENCH_DIR, "allreduce_torch_gloo.py"),
               f"--ranks={ranks}"] + flags
        r = subprocess.run(cmd, capture_output=True, text=True, env=pc.torch_env(1), timeout=660)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip()[-800:])
        return pc.parse_results(r.stdout)
    if impl in STRATA:
        if strata is None:
            raise RuntimeError(f"{STRATA_DEFAULT} is not built yet "
                               "(bazel build //runtime/collective:cross_process_bench)")
        transport = impl.split("-", 1)[1]
        cmd = [strata, f"--transport={transport}", f"--ranks={ranks}"] + flags + strata_args
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {r.stderr.strip()[-800:]}")
        results = pc.parse_results(r.stdout)
        for x in results:  # the bench names itself; keep the transport we asked for
            x["impl"] = impl
        return results
    raise RuntimeError(f"unknown implementation {impl}")


def cell(r):
    if r is None:
        return "-"
    t = r["time_us"]
    return f"{r['busbw_gbps']:.2f} ({t:.0f} µs)" if t >= 100 else f"{r['busbw_gbps']:.2f} ({t:.1f} µs)"


def report(ranks, impls, results, schedule):
    by = {(r["impl"], r["bytes"]): r for r in results if r.get("ranks") == ranks}
    shown = [i for i in impls if any(k[0] == i for k in by)]
    ratios = [(s, p, t) for s, p, t in RATIOS if s in shown and p in shown]
    header = ["size"] + [f"{i} GB/s (time)" for i in shown] + [f"{s} / {p}" for s, p, _ in ratios]
    rows = []
    for nbytes in pc.sizes(schedule):
        size = f"{nbytes // pc.MIB} MiB" if nbytes >= pc.MIB else f"{nbytes // pc.KIB} KiB"
        row = [size] + [cell(by.get((i, nbytes))) for i in shown]
        for s, p, _ in ratios:
            a, b = by.get((s, nbytes)), by.get((p, nbytes))
            # Equal bytes and ranks: the busbw ratio is the inverse time ratio, which
            # keeps its precision where a slow peer's busbw prints as 0.000.
            row.append(f"{b['time_us'] / a['time_us']:.2f}x" if a and b and a["time_us"] > 0 else "-")
        rows.append(row)
    table(f"all-reduce float32 SUM, {ranks} processes: bus bandwidth GB/s (time per operation)",
          header, rows)
    if ranks != 2:
        return
    for s, p, target in ratios:
        big = [by[(p, b)]["time_us"] / by[(s, b)]["time_us"] for b in pc.sizes(schedule)
               if b >= pc.MIB and (s, b) in by and (p, b) in by and by[(s, b)]["time_us"] > 0]
        if big:
            mark = "ok" if min(big) >= target else "BELOW"
            print(f"{s} / {p} at >= 1 MiB: {min(big):.2f}x..{max(big):.2f}x (target >= {target}x: {mark})")
    small = by.get(("strata-shm", 4 * pc.KIB))
    if small:
        mark = "ok" if small["time_us"] <= 5 else "BELOW"
        print(f"strata-shm 4 KiB: {small['time_us']:.1f} µs (target <= 5 µs: {mark})")
    if ("strata-tcp", pc.MIB) in by:
        print("(strata-tcp and mpi-tcp run over loopback here; the issue's TCP target is across "
              "hosts in network namespaces)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="less traffic per size (about a minute)")
    p.add_argument("--rounds", type=int, default=0,
                   help="alternating rounds over all implementations, the fastest counts "
                        "(default: 1 with --quick, else 3)")
    p.add_argument("--ranks", default="2,4", help="process counts, comma-separated")
    p.add_argument("--impls", default=",".join(PEERS + STRATA), help="which to run, comma-separated")
    p.add_argument("--strata", default="auto",
                   help="cross_process_bench binary; auto: bazel-bin's if built; none: skip Strata")
    p.add_argument("--strata_args", default="", help="extra flags for Strata's bench, space-separated")
    p.add_argument("--json_out", default="", help="also write every result to this JSON file")
    a = p.parse_args()
    schedule = dict(pc.QUICK_SCHEDULE if a.quick else pc.FULL_SCHEDULE)
    rank_counts = [int(r) for r in a.ranks.split(",") if r]
    impls = [i for i in a.impls.split(",") if i]
    unknown = set(impls) - set(PEERS + STRATA)
    if unknown:
        sys.exit(f"allreduce_peers: unknown --impls {sorted(unknown)} (known: {PEERS + STRATA})")
    if not rank_counts or any(r < 2 for r in rank_counts):
        sys.exit(f"allreduce_peers: --ranks={a.ranks}: every process count must be at least 2")
    strata = None
    if a.strata == "auto":
        strata = STRATA_DEFAULT if os.access(STRATA_DEFAULT, os.X_OK) else None
    elif a.strata != "none":
        if not os.access(a.strata, os.X_OK):
            sys.exit(f"allreduce_peers: --strata={a.strata} is not an executable")
        strata = a.strata
    if strata is None:
        impls = [i for i in impls if i not in STRATA]
        why = "--strata=none" if a.strata == "none" else (
            f"{STRATA_DEFAULT} is not built (bazel build //runtime/collective:cross_process_bench)")
        print(f"SKIP strata-shm, strata-tcp: {why}", flush=True)

    rounds = a.rounds or (1 if a.quick else 3)
    memcpy, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="allreduce_peers.") as tmp:
        exes = build(tmp)
        if os.path.isfile(exes["memcpy"]):
            for threads in (1, 2):
                out = subprocess.run([exes["memcpy"], f"--threads={threads}",
                                      f"--min_bytes={schedule['min_bytes']}",
                                      f"--max_bytes={schedule['max_bytes']}",
                                      f"--budget_bytes={schedule['budget_bytes'] * 4}"],
                                     capture_output=True, text=True, check=True).stdout
                print(out, end="", flush=True)
                memcpy += pc.parse_results(out)
        else:
            print(f"SKIP memcpy: {exes['memcpy']}", flush=True)
        best = {}  # (impl, ranks, bytes) -> the fastest round's result
        for _ in range(rounds):
            for ranks in rank_counts:
                for impl in impls:
                    if any(x["impl"] == impl and x["ranks"] == ranks for x in skipped):
                        continue
                    try:
                        got = run_impl(impl, ranks, schedule, exes, strata, a.strata_args.split(), tmp)
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        print(f"SKIP {impl} ranks={ranks}: {e}", flush=True)
                        skipped.append({"impl": impl, "ranks": ranks, "why": str(e)})
                        continue
                    for r in got:
                        print(pc.allreduce_result(r["impl"], r["ranks"], r["bytes"], r["time_us"] / 1e6),
                              flush=True)
                        key = (r["impl"], r["ranks"], r["bytes"])
                        if key not in best or r["time_us"] < best[key]["time_us"]:
                            best[key] = r
        results = list(best.values())

    mode = "quick" if a.quick else "full"
    print(f"\nschedule ({mode}): {schedule['budget_bytes'] // pc.MIB} MiB of traffic per size, "
          f"{schedule['min_iters']}..{schedule['max_iters']} timed iterations after a tenth as many "
          f"warm-up ones; time: the slowest rank's mean, the fastest of {rounds} alternating round(s)")
    if memcpy:
        rows = []
        for nbytes in pc.sizes(schedule):
            size = f"{nbytes // pc.MIB} MiB" if nbytes >= pc.MIB else f"{nbytes // pc.KIB} KiB"
            rows.append([size] + [f"{m['copy_gbps']:.1f}" for t in (1, 2) for m in memcpy
                                  if m["threads"] == t and m["bytes"] == nbytes])
        table("memcpy bandwidth, the physical limit for same-host collectives (GB/s)",
              ["size", "1 thread", "2 threads (aggregate)"], rows)
    for ranks in rank_counts:
        report(ranks, impls, results, schedule)
    print("\n" + pc.load_note())
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"mode": mode, "rounds": rounds, "schedule": schedule, "memcpy": memcpy,
                       "allreduce": results, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    main()
