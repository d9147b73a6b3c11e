#!/usr/bin/env python3
"""The performance suite: every benchmark and its peers in one run, then docs/performance.md.

Runs, one after the other on the binaries of one build (copied aside first,
so a build by someone else during the run cannot swap them), the drivers in
tools/bench, each writing its figures with --json_out:

  engine        engine_bench.py          executor per node vs libtorch, MatMul vs
                                         Eigen/OpenBLAS, cached MLP forward vs Eigen
  training      train_throughput.py      one device vs PyTorch, same threads
  inprocess     collective_bench         in-process all-reduce busbw vs memcpy
  crossprocess  allreduce_peers.py       shm/TCP all-reduce vs Open MPI, Gloo, torch gloo on
                                         one host, then --netns: TCP across network namespaces
  multiworker   multiworker_throughput.py --scaling: 1 and 2 workers vs DDP, TF MWMS
  mirrored      mirrored_throughput.py   Mirrored x2 vs one device and TF MirroredStrategy
  failure       failure_detection.py     a killed / frozen worker vs the heartbeat timeout
  security      tls_cost.py              TCP all-reduce with mutual TLS vs plaintext
  collectives   allreduce_peers.py       reduce-scatter and all-gather vs Open MPI, shm and
                --collective             TCP (loopback), 2 and 4 processes
  zero          zero_throughput.py       --zero_stage=1 vs 0 (Adam, MLP 784-512-512-10): mirrored
                                         x2 and x4, 2 workers
  compression   compression_throughput.py  --gradient_compression=bfloat16 and powersgd vs none, 2 workers in
                                         network namespaces on a 1 Gbit/s and a 100 Mbit/s link
  pipeline      pipeline_bench           each stage's idle fraction vs the schedule's bubble, GPipe
                                         and 1F1B, 2 stages on virtual devices
  remote        remote_tensor_peers.py   a tensor's round trip between two tasks' partitions vs
                                         TensorFlow's gRPC runtime

samples the load average every 2 s, writes everything to docs/perf/results.json
and generates docs/performance.md and docs/perf/*.svg from it (report.py).
tools/perf.sh is the one command that sets up, builds and calls this:

  tools/perf.sh [--quick]
  python3 tools/bench/suite/run.py --bazel_bin=DIR [--quick] [--only=engine,failure]
  python3 tools/bench/suite/run.py --report_only     # regenerate from docs/perf/results.json

A benchmark that cannot run (a peer not installed, a failure) is reported as
such in the document, with the tail of its log; the others still run.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
sys.path.insert(0, HERE)
import peers_common as pc  # noqa: E402
import report  # noqa: E402

ROOT = pc.ROOT
BINARIES = {  # staged name: path under bazel-bin
    "executor_bench": "runtime/executor_bench",
    "torch_op_bench": "runtime/torch_op_bench",
    "matmul_bench": "kernels/cpu/matmul_bench",
    "mlp_forward_bench": "runtime/mlp_forward_bench",
    "collective_bench": "runtime/collective/collective_bench",
    "cross_process_bench": "runtime/collective/cross_process_bench",
    "trainer": "tools/trainer",
    "launch": "tools/launch",
    "fit_bench": "fit/fit_bench",
    "lm_bench": "tools/lm_bench",
    "pipeline_bench": "strategy/pipeline_bench",
    "remote_rendezvous_bench": "runtime/remote_rendezvous_bench",
    "pipeline_worker": "tests/pipeline_worker",
}
BAZEL_TARGETS = ["//" + os.path.dirname(p) + ":" + os.path.basename(p) for p in BINARIES.values()]


class LoadSampler:
    """Samples the 1-minute load average every period seconds on a thread."""

    def __init__(self, period=2.0):
        self.samples, self._stop, self._period = [], threading.Event(), period
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), os.getloadavg()[0]))
            self._stop.wait(self._period)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def window(self, t0, t1):
        vals = [v for t, v in self.samples if t0 <= t <= t1] or [os.getloadavg()[0]]
        return {"mean": sum(vals) / len(vals), "max": max(vals)}


def run_logged(cmd, log_path, env=None, timeout=1800):
    """Runs cmd with output to log_path; raises RuntimeError with the log's tail on failure."""
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout,
                           cwd=BENCH)
    if r.returncode != 0:
        with open(log_path, errors="replace") as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        raise RuntimeError(f"exit {r.returncode}: " + " | ".join(lines[-5:]))


def load_json(path):
    with open(path) as f:
        return json.load(f)


def bench_engine(ctx):
    out = os.path.join(ctx["tmp"], "engine.json")
    cmd = [sys.executable, "engine_bench.py", "--no_build", f"--bin_dir={ctx['bin']}", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_training(ctx):
    out = os.path.join(ctx["tmp"], "training.json")
    # Two rounds even when quick (of half as many steps): one unlucky time slice
    # can halve a 2-thread run here.
    cmd = [sys.executable, "train_throughput.py", f"--trainer={ctx['bin']}/trainer", f"--json_out={out}",
           f"--rounds={2 if ctx['quick'] else 3}"] + (["--quick"] if ctx["quick"] else [])
    run_logged(cmd, ctx["log"])
    return load_json(out)


def bench_inprocess(ctx):
    out = os.path.join(ctx["tmp"], "inprocess.json")
    # Medians of 3 repetitions in both modes: a single repetition moved a
    # 16 MiB row between 0.58 and 1.11 of memcpy from one run to the next.
    cmd = [f"{ctx['bin']}/collective_bench", f"--benchmark_out={out}", "--benchmark_out_format=json",
           "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"]
    run_logged(cmd, ctx["log"])
    rows = []
    for b in load_json(out)["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if not b["run_name"].startswith("BM_AllReduce/"):
            continue  # BM_FlightRecorder: the recorder's cost, not a target's
        # BM_AllReduce/bytes:4096/alg:0/min_time:0.300/real_time/threads:2[_median]
        parts = dict(p.split(":", 1) for p in b["run_name"].split("/") if ":" in p)
        rows.append({"ranks": int(b["threads"]), "bytes": int(parts["bytes"]),
                     "algorithm": ["direct", "ring", "reduce_to_one"][int(parts["alg"])],
                     "busbw_gbps": b["busbw_GBps"], "memcpy_gbps": b["memcpy_GBps"],
                     "vs_memcpy": b["vs_memcpy"], "time_us": b["us_per_op"]})
    return {"repetitions": 3, "results": rows}


def bench_crossprocess(ctx):
    """One host (shm, TCP over loopback), then TCP across hosts (network namespaces: W3, W4)."""
    out = os.path.join(ctx["tmp"], "crossprocess.json")
    cmd = [sys.executable, "allreduce_peers.py", f"--strata={ctx['bin']}/cross_process_bench",
           f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    data = load_json(out)
    # Across hosts the quick mode runs 2 ranks only, but best of 2 rounds
    # (about 15 s): W3 and W4 are judged on these figures. Both modes keep
    # to MTU 1500 (MTU 9000 changed little: docs/perf/notes/crossprocess.md).
    netns_out = os.path.join(ctx["tmp"], "crossprocess_netns.json")
    netns = cmd[:-1] + ["--netns", "--mtu=1500", f"--json_out={netns_out}"] + (
        ["--quick", "--ranks=2", "--rounds=2"] if ctx["quick"] else ["--ranks=2,4"])
    try:
        run_logged(netns, ctx["log"][:-len(".log")] + "_netns.log", timeout=3600)
        data["netns"] = load_json(netns_out)
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
        data["netns_error"] = str(e)
    return data


def bench_collectives(ctx):
    """Reduce-scatter and all-gather against Open MPI's (B1-B4), one host; then over TCP across hosts."""
    data = {}
    for collective in ("reduce_scatter", "allgather"):
        out = os.path.join(ctx["tmp"], f"{collective}.json")
        cmd = [sys.executable, "allreduce_peers.py", f"--strata={ctx['bin']}/cross_process_bench",
               f"--collective={collective}", "--ranks=2,4", f"--json_out={out}"]
        log = ctx["log"][:-len(".log")] + f"_{collective}"
        run_logged(cmd + (["--quick"] if ctx["quick"] else []), log + ".log")
        data[collective] = load_json(out)
        # Across hosts (network namespaces), as the all-reduce's W3/W4 rows:
        # the TCP case. Open MPI and Strata (allreduce_peers.py times these two
        # collectives for those only).
        netns_out = os.path.join(ctx["tmp"], f"{collective}_netns.json")
        netns = cmd[:-1] + ["--netns", "--mtu=1500", "--impls=mpi-tcp,strata-tcp",
                            f"--json_out={netns_out}"] + (["--quick", "--rounds=2"] if ctx["quick"] else [])
        try:
            run_logged(netns, log + "_netns.log", timeout=1800)
            data[collective]["netns"] = load_json(netns_out)
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            data[collective]["netns_error"] = str(e)
    return data


def bench_zero(ctx):
    """ZeRO stage 1's step time against mirrored optimizer state (Z1)."""
    out = os.path.join(ctx["tmp"], "zero.json")
    cmd = [sys.executable, "zero_throughput.py", f"--trainer={ctx['bin']}/trainer",
           f"--launch={ctx['bin']}/launch", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_compression(ctx):
    """bfloat16 and PowerSGD gradients vs float32 on rate-limited links (C1-C4)."""
    out = os.path.join(ctx["tmp"], "compression.json")
    cmd = [sys.executable, "compression_throughput.py", f"--trainer={ctx['bin']}/trainer", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    d = load_json(out)
    if d.get("skipped"):
        raise RuntimeError(d["skipped"])
    return d


def bench_multiworker(ctx):
    out = os.path.join(ctx["tmp"], "multiworker.json")
    # Two rounds even when quick, as for training: the ratios compare runs a
    # minute apart, and one round leaves them to a single burst of other load.
    cmd = [sys.executable, "multiworker_throughput.py", "--scaling", f"--trainer={ctx['bin']}/trainer",
           f"--launch={ctx['bin']}/launch", f"--json_out={out}"]
    run_logged(cmd + (["--quick", "--rounds=2"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_mirrored(ctx):
    tf_python = pc.find_tf_python()
    if tf_python is None:
        raise RuntimeError("no python3 here imports tensorflow: run tools/setup.sh --peers")
    out = os.path.join(ctx["tmp"], "mirrored.json")
    cmd = [tf_python, "mirrored_throughput.py", f"--trainer={ctx['bin']}/trainer", f"--json_out={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    run_logged(cmd + (["--quick", "--rounds=2"] if ctx["quick"] else []), ctx["log"], env=env)
    return load_json(out)


def bench_failure(ctx):
    out = os.path.join(ctx["tmp"], "failure.json")
    cmd = [sys.executable, "failure_detection.py", f"--trainer={ctx['bin']}/trainer", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_fit(ctx):
    # Interleaved rounds of Fit and the hand-written loop, each side's median.
    steps, rounds = (1500, 3) if ctx["quick"] else (3000, 5)
    out = os.path.join(ctx["tmp"], "fit.json")
    cmd = [os.path.join(ctx["bin"], "fit_bench"), "--json", f"--bench_steps={steps}", f"--rounds={rounds}"]
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, check=True, timeout=900)
    with open(out) as f:
        lines = [l for l in f if l.startswith("{")]
    if not lines:
        raise RuntimeError("fit_bench printed no result")
    return json.loads(lines[-1])


def bench_security(ctx):
    out = os.path.join(ctx["tmp"], "security.json")
    cmd = [sys.executable, "tls_cost.py", f"--strata={ctx['bin']}/cross_process_bench", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_lm(ctx):
    out = os.path.join(ctx["tmp"], "lm.json")
    cmd = [sys.executable, "lm_throughput.py", f"--lm_bench={ctx['bin']}/lm_bench", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_pipeline(ctx):
    """The pipeline's bubble against the schedule's theory (P1)."""
    out = os.path.join(ctx["tmp"], "pipeline.json")
    cmd = [os.path.join(ctx["bin"], "pipeline_bench"), "--stages=2", "--micro_batches=4,8",
           "--layers_per_stage=4", f"--steps={5 if ctx['quick'] else 20}", f"--out={out}"]
    run_logged(cmd, ctx["log"])
    return load_json(out)


def bench_pipeline_memory(ctx):
    """Pipelined over 2 simulated hosts within a memory limit where data parallelism fails (P2)."""
    out = os.path.join(ctx["tmp"], "pipeline_memory.json")
    cmd = [sys.executable, "pipeline_memory.py", f"--worker={ctx['bin']}/pipeline_worker",
           f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_remote(ctx):
    """A tensor's round trip between two tasks vs TensorFlow (R1)."""
    out = os.path.join(ctx["tmp"], "remote.json")
    cmd = [sys.executable, "remote_tensor_peers.py", f"--bench={ctx['bin']}/remote_rendezvous_bench",
           f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_parameter_server(ctx):
    """2 workers + 1 ps vs TensorFlow's ParameterServerStrategy (PS1)."""
    out = os.path.join(ctx["tmp"], "parameter_server.json")
    cmd = [sys.executable, "ps_throughput.py", f"--trainer={ctx['bin']}/trainer",
           f"--launch={ctx['bin']}/launch", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


def bench_ps_straggler(ctx):
    """One worker at a quarter CPU: parameter servers vs synchronous (PS2)."""
    out = os.path.join(ctx["tmp"], "ps_straggler.json")
    cmd = [sys.executable, "ps_straggler.py", f"--trainer={ctx['bin']}/trainer",
           f"--launch={ctx['bin']}/launch", f"--json_out={out}"]
    run_logged(cmd + (["--quick"] if ctx["quick"] else []), ctx["log"])
    return load_json(out)


# The staged binaries each benchmark runs: one missing fails only its own
# benchmarks (a machine without the peers' libraries builds no torch_op_bench).
NEEDS = {
    "engine": ["executor_bench", "torch_op_bench", "matmul_bench", "mlp_forward_bench"],
    "training": ["trainer"], "inprocess": ["collective_bench"], "crossprocess": ["cross_process_bench"],
    "multiworker": ["trainer", "launch"], "mirrored": ["trainer"], "failure": ["trainer", "launch"],
    "fit": ["fit_bench"],
    "lm": ["lm_bench"],
    "security": ["cross_process_bench"],
    "collectives": ["cross_process_bench"],
    "zero": ["trainer", "launch"],
    "compression": ["trainer"],
    "pipeline": ["pipeline_bench"],
    "pipeline_memory": ["pipeline_worker"],
    "remote": ["remote_rendezvous_bench"],
    "parameter_server": ["trainer", "launch"],
    "ps_straggler": ["trainer", "launch"],
}

BENCHMARKS = [
    ("engine", bench_engine), ("training", bench_training), ("inprocess", bench_inprocess),
    ("crossprocess", bench_crossprocess), ("multiworker", bench_multiworker),
    ("mirrored", bench_mirrored), ("failure", bench_failure), ("fit", bench_fit),
    ("lm", bench_lm), ("security", bench_security), ("collectives", bench_collectives),
    ("zero", bench_zero), ("compression", bench_compression), ("pipeline", bench_pipeline),
    ("pipeline_memory", bench_pipeline_memory),
    ("remote", bench_remote), ("parameter_server", bench_parameter_server),
    ("ps_straggler", bench_ps_straggler),
]


def stage_binaries(bazel_bin, dest):
    """Copies the bench binaries out of bazel-bin; returns {name: why} for those missing."""
    missing = {}
    for name, rel in BINARIES.items():
        src = os.path.join(bazel_bin, rel)
        if os.access(src, os.X_OK):
            shutil.copy2(src, os.path.join(dest, name))
        else:
            missing[name] = f"{src} (bazel build -c opt {BAZEL_TARGETS[list(BINARIES).index(name)]})"
    return missing


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release()}


def git_commit():
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="each driver's quick mode (under 5 minutes in all)")
    p.add_argument("--bazel_bin", default=os.path.join(ROOT, "bazel-bin"),
                   help="the opt build's output folder (tools/perf.sh passes `bazel info bazel-bin`)")
    p.add_argument("--only", default="", help="run only these benchmarks, comma-separated: "
                   + ",".join(n for n, _ in BENCHMARKS))
    p.add_argument("--results", default=os.path.join(ROOT, "docs/perf/results.json"))
    p.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    p.add_argument("--report_only", action="store_true", help="regenerate the document from --results")
    p.add_argument("--command", default="", help="the command line to name in the document")
    p.add_argument("--print_targets", action="store_true", help="print the Bazel targets it needs, and exit")
    a = p.parse_args()
    if a.print_targets:
        print(" ".join(BAZEL_TARGETS))
        return

    if not a.report_only:
        only = [n for n in a.only.split(",") if n]
        unknown = set(only) - {n for n, _ in BENCHMARKS}
        if unknown:
            sys.exit(f"suite: unknown --only {sorted(unknown)}")
        results = run_all(a, only)
        if only and os.path.exists(a.results):
            # --only: the benchmarks run replace theirs in the previous
            # results; the others keep theirs, each entry saying its run.
            previous = load_json(a.results)
            for entry in previous["benchmarks"].values():
                entry.setdefault("run", {k: previous[k] for k in ("date", "commit", "mode")})
            previous["benchmarks"].update(results["benchmarks"])
            for entry in results["benchmarks"].values():
                entry["run"] = {k: results[k] for k in ("date", "commit", "mode")}
            results = previous
        os.makedirs(os.path.dirname(a.results), exist_ok=True)
        with open(a.results, "w") as f:
            json.dump(results, f, indent=None, separators=(",", ":"))
            f.write("\n")
    results = load_json(a.results)
    report.write(results, a.doc, os.path.dirname(a.results))
    print(f"suite: wrote {os.path.relpath(a.doc, ROOT)} and plots under "
          f"{os.path.relpath(os.path.dirname(a.results), ROOT)}/")


def run_all(a, only):
    start = time.monotonic()
    sampler = LoadSampler().start()
    results = {"mode": "quick" if a.quick else "full",
               "command": a.command or ("tools/perf.sh" + (" --quick" if a.quick else "")),
               "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "commit": git_commit(),
               "machine": machine(), "benchmarks": {}}
    with tempfile.TemporaryDirectory(prefix="strata-perf.") as tmp:
        bin_dir = os.path.join(tmp, "bin")
        os.makedirs(bin_dir)
        missing = stage_binaries(a.bazel_bin, bin_dir)
        logs = os.path.join(tempfile.gettempdir(), "strata-perf-logs")
        os.makedirs(logs, exist_ok=True)
        todo = [(n, fn) for n, fn in BENCHMARKS if not only or n in only]
        for i, (name, fn) in enumerate(todo, 1):
            log = os.path.join(logs, f"{name}.log")
            print(f"[{i}/{len(todo)}] {name} ... ", end="", flush=True)
            t0 = time.monotonic()
            entry = {}
            try:
                absent = [missing[b] for b in NEEDS[name] if b in missing]
                if absent:
                    raise RuntimeError("not built: " + ", ".join(absent))
                entry["data"] = fn({"quick": a.quick, "bin": bin_dir, "tmp": tmp, "log": log})
            except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                entry["error"] = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
            t1 = time.monotonic()
            entry["seconds"] = t1 - t0
            entry["load"] = sampler.window(t0, t1)
            results["benchmarks"][name] = entry
            status = "FAILED: " + entry["error"][:300] if "error" in entry else "ok"
            print(f"{t1 - t0:.0f} s, load {entry['load']['mean']:.1f} (max {entry['load']['max']:.1f}): "
                  f"{status}  [log: {log}]", flush=True)
    sampler.stop()
    results["seconds"] = time.monotonic() - start
    results["load"] = sampler.window(start, time.monotonic())
    print(f"suite: {results['seconds']:.0f} s in all, load average {results['load']['mean']:.1f} "
          f"(max {results['load']['max']:.1f}) on {os.cpu_count()} cores")
    return results


if __name__ == "__main__":
    main()
