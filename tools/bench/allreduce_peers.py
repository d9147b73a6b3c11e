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

With --netns the TCP implementations (mpi-tcp, gloo, torch-gloo, strata-tcp)
run across hosts instead, as the issue's TCP target asks: each rank in its own
network namespace with an address on eth0, the namespaces joined by a veth
pair (more than 2 ranks: a bridge), every implementation over that same link
(tools/bench/netns_hosts.py). Open MPI: mpirun on host 0 starts an orted on
each other host through an rsh agent that is `ip netns exec` (--mca
btl_tcp_if_include eth0, oob_tcp_if_include eth0; ranks bound as mpirun binds
them on one host); Gloo C++: its TCP device on the host's address; PyTorch:
GLOO_SOCKET_IFNAME=eth0; Strata: cross_process_bench --rank=R --host=ADDR, one
process per host, meeting through a shared --kv_dir. The link keeps the
kernel's defaults but for its MTU (--mtu, 1500 by default: what two hosts on
Ethernet get; 9000: jumbo frames). Needs root and `ip netns`: without them it
exits with status 3 and says why.

--collective=reduce_scatter or allgather times that collective instead
(MPI_Reduce_scatter_block, MPI_Allgather; cross_process_bench --collective),
Open MPI and Strata only; a size is the whole tensor (reduce-scatter's input,
all-gather's output), bus bandwidth = algbw x (n-1)/n.

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
  python3 tools/bench/allreduce_peers.py --netns [--mtu=1500,9000] [--quick] [--ranks=2] ...

--quick (under a minute here) spends 128 MiB of traffic per size, at most
300 iterations, one round; the full mode 1 GiB, at most 2000, and the
fastest of 3 alternating rounds (the machine's other load comes and goes).
"""
import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import netns_hosts
import peers_common as pc
from engine_bench import table

PEERS = ["mpi-shm", "mpi-tcp", "gloo", "torch-gloo"]
COLLECTIVES = {"allreduce": "all_reduce", "reduce_scatter": "reduce_scatter", "allgather": "all_gather"}
# What times the collectives other than all-reduce (Gloo's and torch's peers time all-reduce only).
OTHER_COLLECTIVE_IMPLS = ["mpi-shm", "mpi-tcp", "strata-shm", "strata-tcp"]
NETNS_IMPLS = ["mpi-tcp", "gloo", "torch-gloo", "strata-tcp"]  # what can cross hosts
NETNS_UNAVAILABLE = 3  # exit status when namespaces cannot be made here
STRATA = ["strata-shm", "strata-tcp"]
STRATA_DEFAULT = os.path.join(pc.ROOT, "bazel-bin/runtime/collective/cross_process_bench")
# Strata / peer ratios shown, and the target for the 2-process case at >= 1 MiB.
RATIOS = [("strata-shm", "mpi-shm", 1.0), ("strata-tcp", "mpi-tcp", 1.0), ("strata-tcp", "gloo", 3.0),
          ("strata-tcp", "torch-gloo", 3.0)]
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


COLLECTIVE = "allreduce"  # --collective


def run_impl(impl, ranks, schedule, exes, strata, strata_args, tmp):
    """RESULT dicts of one implementation at one rank count; raises RuntimeError with why not."""
    flags = pc.schedule_flags(schedule)
    if COLLECTIVE != "allreduce":
        if impl not in OTHER_COLLECTIVE_IMPLS:
            raise RuntimeError(f"no {COLLECTIVE} peer for {impl}")
        if impl.startswith("mpi-"):
            flags = flags + [f"--collective={COLLECTIVE}"]
        else:
            strata_args = strata_args + [f"--collective={COLLECTIVES[COLLECTIVE]}"]
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


def run_impl_netns(impl, hosts, schedule, exes, strata, strata_args, tmp):
    """RESULT dicts of one implementation with one rank per host of hosts (NetnsHosts)."""
    flags = pc.schedule_flags(schedule)
    ranks = hosts.n
    if impl == "mpi-tcp":
        if not os.path.isfile(exes["mpi"]):
            raise RuntimeError(exes["mpi"])
        cmd = (hosts.mpirun_prefix(tmp) + ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                                           "--mca", "btl_tcp_if_include", hosts.ifname]
               + [exes["mpi"], f"--impl={impl}"] + flags)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"mpirun exit {r.returncode}: {r.stderr.strip()[-500:]}")
        return pc.parse_results(r.stdout)
    store = tempfile.mkdtemp(dir=tmp)
    if impl == "gloo":
        if not os.path.isfile(exes["gloo"]):
            raise RuntimeError(exes["gloo"])
        cmds = [hosts.exec(r, [exes["gloo"], f"--rank={r}", f"--size={ranks}", f"--store={store}",
                               f"--host={hosts.addr(r)}"] + flags) for r in range(ranks)]
        return pc.parse_results(pc.run_ranks(cmds, timeout=600)[0])
    if impl == "torch-gloo":
        why = pc.check_torch()
        if why:
            raise RuntimeError(why)
        env = pc.torch_env(1)
        env["GLOO_SOCKET_IFNAME"] = hosts.ifname
        cmds = [hosts.exec(r, [pc.TORCH_PYTHON, os.path.join(pc.BENCH_DIR, "allreduce_torch_gloo.py"),
                               f"--ranks={ranks}", f"--rank={r}", f"--store={store}/file"] + flags)
                for r in range(ranks)]
        return pc.parse_results(pc.run_ranks(cmds, env=env, timeout=660)[0])
    if impl == "strata-tcp":
        if strata is None:
            raise RuntimeError(f"{STRATA_DEFAULT} is not built yet "
                               "(bazel build //runtime/collective:cross_process_bench)")
        cmds = [hosts.exec(r, [strata, "--transport=tcp", f"--ranks={ranks}", f"--rank={r}",
                               f"--kv_dir={store}", f"--host={hosts.addr(r)}"] + flags + strata_args)
                for r in range(ranks)]
        results = pc.parse_results(pc.run_ranks(cmds, timeout=600)[0])
        for x in results:
            x["impl"] = impl
        return results
    raise RuntimeError(f"{impl} does not run across hosts (--netns runs {', '.join(NETNS_IMPLS)})")


def cell(r):
    if r is None:
        return "-"
    t = r["time_us"]
    return f"{r['busbw_gbps']:.2f} ({t:.0f} µs)" if t >= 100 else f"{r['busbw_gbps']:.2f} ({t:.1f} µs)"


def report(ranks, impls, results, schedule, mtu=None):
    """One table: every implementation at one rank count (and, across hosts, one MTU)."""
    by = {(r["impl"], r["bytes"]): r for r in results
          if r.get("ranks") == ranks and r.get("mtu") == mtu}
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
    where = ("one host" if mtu is None else
             f"{ranks} hosts (network namespaces, veth link, MTU {mtu})")
    what = {"allreduce": "all-reduce", "reduce_scatter": "reduce-scatter", "allgather": "all-gather"}[COLLECTIVE]
    table(f"{what} float32 SUM, {ranks} processes, {where}: bus bandwidth GB/s (time per operation)",
          header, rows)
    if ranks != 2 and COLLECTIVE == "allreduce":
        return
    for s, p, target in ratios:
        big = [by[(p, b)]["time_us"] / by[(s, b)]["time_us"] for b in pc.sizes(schedule)
               if b >= pc.MIB and (s, b) in by and (p, b) in by and by[(s, b)]["time_us"] > 0]
        if big:
            mark = "ok" if min(big) >= target else "BELOW"
            print(f"{s} / {p} at >= 1 MiB: {min(big):.2f}x..{max(big):.2f}x (target >= {target}x: {mark})")
    small = by.get(("strata-shm", 4 * pc.KIB))
    if small and COLLECTIVE == "allreduce":
        mark = "ok" if small["time_us"] <= 5 else "BELOW"
        print(f"strata-shm 4 KiB: {small['time_us']:.1f} µs (target <= 5 µs: {mark})")
    if ("strata-tcp", pc.MIB) in by and mtu is None:
        print("(strata-tcp and mpi-tcp run over loopback here; the issue's TCP target is across "
              "hosts: allreduce_peers.py --netns)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="less traffic per size (about a minute)")
    p.add_argument("--rounds", type=int, default=0,
                   help="alternating rounds over all implementations, the fastest counts "
                        "(default: 1 with --quick, else 3)")
    p.add_argument("--ranks", default="2,4", help="process counts, comma-separated")
    p.add_argument("--impls", default="",
                   help="which to run, comma-separated (default: " + ",".join(PEERS + STRATA)
                        + "; with --netns " + ",".join(NETNS_IMPLS) + ")")
    p.add_argument("--netns", action="store_true",
                   help="the TCP implementations across hosts: one network namespace per rank")
    p.add_argument("--mtu", default="1500", help="with --netns: the link's MTUs, comma-separated")
    p.add_argument("--host_congestion", default="",
                   help="with --netns: every host's default TCP congestion control (e.g. reno), "
                        "which the peers use; Strata's sockets choose their own (--strata_args="
                        "--tcp_congestion=system follows the host); default: the kernel's")
    p.add_argument("--strata", default="auto",
                   help="cross_process_bench binary; auto: bazel-bin's if built; none: skip Strata")
    p.add_argument("--strata_args", default="", help="extra flags for Strata's bench, space-separated")
    p.add_argument("--json_out", default="", help="also write every result to this JSON file")
    p.add_argument("--collective", default="allreduce", choices=sorted(COLLECTIVES),
                   help="the collective timed (reduce_scatter, allgather: Open MPI and Strata only)")
    a = p.parse_args()
    global COLLECTIVE
    COLLECTIVE = a.collective
    schedule = dict(pc.QUICK_SCHEDULE if a.quick else pc.FULL_SCHEDULE)
    rank_counts = [int(r) for r in a.ranks.split(",") if r]
    known = NETNS_IMPLS if a.netns else PEERS + STRATA
    if a.collective != "allreduce":
        known = [i for i in known if i in OTHER_COLLECTIVE_IMPLS]
    impls = [i for i in (a.impls or ",".join(known)).split(",") if i]
    unknown = set(impls) - set(known)
    if unknown:
        sys.exit(f"allreduce_peers: unknown --impls {sorted(unknown)} (known"
                 + (" across hosts" if a.netns else "") + f": {known})")
    if not rank_counts or any(r < 2 for r in rank_counts):
        sys.exit(f"allreduce_peers: --ranks={a.ranks}: every process count must be at least 2")
    mtus = [None]
    if a.netns:
        try:
            mtus = [int(m) for m in a.mtu.split(",") if m]
        except ValueError:
            mtus = []
        if not mtus or any(m < 68 or m > 65535 for m in mtus):
            sys.exit(f"allreduce_peers: --mtu={a.mtu}: MTUs in 68..65535, comma-separated")
        why = netns_hosts.check()
        if why:
            print(f"allreduce_peers: --netns: {why}", file=sys.stderr)
            sys.exit(NETNS_UNAVAILABLE)
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
    # A SIGTERM (a timeout, ^C in a parent) unwinds like an exception, so the
    # namespaces of a --netns run are removed whatever ends it.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))

    rounds = a.rounds or (1 if a.quick else 3)
    memcpy, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="allreduce_peers.") as tmp:
        exes = build(tmp)
        if a.netns:
            pass  # memcpy bounds same-host collectives; across hosts the link does
        elif os.path.isfile(exes["memcpy"]):
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
        best = {}  # (impl, ranks, mtu, bytes) -> the fastest round's result
        for _ in range(rounds):
            for mtu in mtus:
                for ranks in rank_counts:
                    try:
                        hosts = (netns_hosts.NetnsHosts(ranks, mtu, a.host_congestion or None)
                                 if a.netns else None)
                        with hosts if hosts else contextlib.nullcontext():
                            measure(impls, ranks, mtu, hosts, schedule, exes, strata, a.strata_args.split(),
                                    tmp, skipped, best)
                    except netns_hosts.NetnsUnavailable as e:
                        print(f"allreduce_peers: --netns: {e}", file=sys.stderr)
                        sys.exit(NETNS_UNAVAILABLE)
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
    for mtu in mtus:
        for ranks in rank_counts:
            report(ranks, impls, results, schedule, mtu)
    print("\n" + pc.load_note())
    if a.json_out:
        out = {"mode": mode, "rounds": rounds, "schedule": schedule, "memcpy": memcpy,
               "allreduce": results, "skipped": skipped, "collective": a.collective}
        if a.netns:
            out.update({"link": "netns", "mtus": mtus, "ifname": netns_hosts.IFNAME})
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)


def measure(impls, ranks, mtu, hosts, schedule, exes, strata, strata_args, tmp, skipped, best):
    """One round of every implementation at one rank count (on hosts, when across hosts)."""
    for impl in impls:
        if any(x["impl"] == impl and x["ranks"] == ranks and x.get("mtu") == mtu for x in skipped):
            continue
        try:
            if hosts is None:
                got = run_impl(impl, ranks, schedule, exes, strata, strata_args, tmp)
            else:
                got = run_impl_netns(impl, hosts, schedule, exes, strata, strata_args, tmp)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            where = "" if mtu is None else f" across hosts (MTU {mtu})"
            print(f"SKIP {impl} ranks={ranks}{where}: {e}", flush=True)
            skipped.append({"impl": impl, "ranks": ranks, "why": str(e)}
                           | ({} if mtu is None else {"mtu": mtu}))
            continue
        for r in got:
            line = (pc.allreduce_result(impl, r["ranks"], r["bytes"], r["time_us"] / 1e6)
                    if COLLECTIVE == "allreduce" else
                    f"RESULT impl={impl} collective={COLLECTIVE} ranks={r['ranks']} bytes={r['bytes']} "
                    f"time_us={r['time_us']:.2f} busbw_gbps={r['busbw_gbps']:.3f}")
            print(line + ("" if mtu is None else f" mtu={mtu}"), flush=True)
            if mtu is not None:
                r["mtu"] = mtu
            key = (r["impl"], r["ranks"], mtu, r["bytes"])
            if key not in best or r["time_us"] < best[key]["time_us"]:
                best[key] = r


if __name__ == "__main__":
    main()
