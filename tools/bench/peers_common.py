"""Shared pieces of the peer benchmarks (all-reduce and multi-worker training).

Every peer and Strata's own cross-process benchmarks print one line per
measurement, which the drivers parse:

  RESULT impl=mpi-shm ranks=2 bytes=4096 time_us=2.1 busbw_gbps=3.9
  RESULT impl=ddp-gloo workers=2 examples_per_s=17000

This module holds that format, the all-reduce size and iteration schedule
every peer follows (the C and C++ peers take the same flags), the launch of N
local rank processes that fail together, and the environment the Python
peers need to be fair (Debian's interpreter, OpenBLAS-openmp, thread counts,
traffic on loopback only). See /work/shared/notes/peers-on-this-machine.md.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_DIR = os.path.join(ROOT, "tools", "bench")
# Debian's interpreter has python3-torch; the python3 first on PATH may not.
TORCH_PYTHON = "/usr/bin/python3"
# Debian's torch calls libblas.so.3, the ~20x slower reference BLAS unless pointed here.
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"

KIB, MIB = 1 << 10, 1 << 20

# --- the all-reduce schedule -------------------------------------------------
# Sizes from min_bytes to max_bytes, x4 each step. Iterations per size:
# budget_bytes / bytes clamped to [min_iters, max_iters]; warm-up a tenth of
# that, at least 2. The same numbers go to every peer as flags.
FULL_SCHEDULE = {"min_bytes": 4 * KIB, "max_bytes": 64 * MIB, "budget_bytes": 1 << 30,
                 "min_iters": 10, "max_iters": 2000}
QUICK_SCHEDULE = {"min_bytes": 4 * KIB, "max_bytes": 64 * MIB, "budget_bytes": 128 * MIB,
                  "min_iters": 3, "max_iters": 300}


def add_schedule_flags(parser):
    for name, value in FULL_SCHEDULE.items():
        parser.add_argument(f"--{name}", type=int, default=value)


def check_schedule(s):
    """None when the schedule is usable, else what is wrong with it."""
    if s["min_bytes"] < 4 or s["max_bytes"] < s["min_bytes"]:
        return f"need 4 <= --min_bytes <= --max_bytes (got {s['min_bytes']}, {s['max_bytes']})"
    if s["min_iters"] < 1 or s["max_iters"] < s["min_iters"] or s["budget_bytes"] < 1:
        return (f"need 1 <= --min_iters <= --max_iters and --budget_bytes >= 1 (got "
                f"{s['min_iters']}, {s['max_iters']}, {s['budget_bytes']})")
    return None


def schedule_flags(schedule):
    return [f"--{k}={v}" for k, v in schedule.items()]


def sizes(s):
    b = s["min_bytes"]
    while b <= s["max_bytes"]:
        yield b
        b *= 4


def iterations(s, nbytes):
    """(warm-up, timed) iterations for one size."""
    iters = min(max(s["budget_bytes"] // nbytes, s["min_iters"]), s["max_iters"])
    return max(2, iters // 10), iters


def busbw_gbps(nbytes, seconds, ranks):
    """Bus bandwidth: algbw x 2(n-1)/n, the bytes each rank moves in a ring."""
    return nbytes / seconds * 2.0 * (ranks - 1) / ranks / 1e9


def allreduce_result(impl, ranks, nbytes, seconds):
    return (f"RESULT impl={impl} ranks={ranks} bytes={nbytes} time_us={seconds * 1e6:.2f} "
            f"busbw_gbps={busbw_gbps(nbytes, seconds, ranks):.3f}")


def train_result(impl, workers, examples_per_s):
    return f"RESULT impl={impl} workers={workers} examples_per_s={examples_per_s:.0f}"


_RESULT = re.compile(r"^(?:\[[^\]]*\]\s*)?RESULT((?:\s+\w+=\S+)+)\s*$")


def parse_results(text):
    """Every RESULT line of text as a dict; numbers become int or float.

    A prefix in brackets (a launcher's "[worker 0] ") is allowed."""
    out = []
    for line in text.splitlines():
        m = _RESULT.match(line.strip())
        if not m:
            continue
        r = {}
        for kv in m.group(1).split():
            k, v = kv.split("=", 1)
            for conv in (int, float):
                try:
                    v = conv(v)
                    break
                except ValueError:
                    pass
            r[k] = v
        out.append(r)
    return out


# --- local processes ---------------------------------------------------------
def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held open until all are chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run_ranks(commands, env=None, timeout=600, envs=None):
    """Runs one process per command, concurrently; returns their stdouts.

    When any exits non-zero or the timeout passes, the others are killed and
    RuntimeError names the first to fail with the tail of its stderr: a peer
    that dies must not leave the others waiting for it."""
    procs = []
    for i, cmd in enumerate(commands):
        e = dict(env if env is not None else os.environ)
        if envs:
            e.update(envs[i])
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    deadline = time.monotonic() + timeout
    failed = None
    while failed is None and any(p.poll() is None for p in procs):
        for i, p in enumerate(procs):
            if p.poll() not in (None, 0):
                failed = (i, f"exit {p.returncode}")
                break
        if failed is None and time.monotonic() > deadline:
            failed = (next(i for i, p in enumerate(procs) if p.poll() is None),
                      f"still running after {timeout} s")
        time.sleep(0.02)
    if failed is None:
        failed = next(((i, f"exit {p.returncode}") for i, p in enumerate(procs) if p.returncode), None)
    for p in procs:
        if p.poll() is None:
            p.kill()
    outs = [p.communicate() for p in procs]
    if failed is not None:
        i, why = failed
        err = outs[i][1].strip().splitlines()[-15:]
        raise RuntimeError(f"rank {i} ({' '.join(commands[i][:3])} ...): {why}\n  " + "\n  ".join(err))
    return [o[0] for o in outs]


_coretype = {}


def openblas_coretype(env):
    """The OpenBLAS kernel to ask for, or None to let OpenBLAS choose.

    OpenBLAS picks its kernels from the CPU model; a model newer than its
    table (Debian 12's 0.3.21 on Sapphire Rapids, say) falls back to the
    generic SSE3 "Prescott" kernels, several times slower than the CPU
    allows, which would make every PyTorch peer look slow. Then the best
    kernel set the CPU's flags support is named instead (SkylakeX for
    AVX-512, Haswell for AVX2), as a user tuning PyTorch would."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    if "core" not in _coretype:
        probe = subprocess.run([TORCH_PYTHON, "-c", "import torch; torch.mm(torch.ones(64, 64), torch.ones(64, 64))"],
                               capture_output=True, text=True, env=dict(env, OPENBLAS_VERBOSE="2"))
        chosen = re.search(r"Core: (\w+)", probe.stdout + probe.stderr)
        core = None
        if chosen and chosen.group(1) == "Prescott":
            try:
                with open("/proc/cpuinfo") as f:
                    flags = set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())
            except (OSError, AttributeError):
                flags = set()
            core = "SkylakeX" if "avx512f" in flags else "Haswell" if {"avx2", "fma"} <= flags else None
        _coretype["core"] = core
    return _coretype["core"]


def torch_env(threads):
    """Environment for a PyTorch peer: OpenBLAS-openmp (its best kernels, see
    openblas_coretype), OMP threads, gloo on loopback."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = OPENBLAS + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["OMP_NUM_THREADS"] = str(threads)
    env["GLOO_SOCKET_IFNAME"] = "lo"
    core = openblas_coretype(env)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    return env


def check_torch():
    """None when the PyTorch peers can run, else why not."""
    if not os.path.isdir(OPENBLAS):
        return f"{OPENBLAS} is missing: run tools/setup.sh --peers (libopenblas0-openmp)"
    probe = subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed as d; assert d.is_available()"],
                           capture_output=True)
    if probe.returncode != 0:
        return f"{TORCH_PYTHON} cannot import torch.distributed: run tools/setup.sh --peers (python3-torch)"
    return None


def find_tf_python():
    """An interpreter that imports tensorflow (this one first), or None."""
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3"]
    for py in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run([py, "-c", "import tensorflow"], capture_output=True,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if probe.returncode == 0:
            return py
    return None


def load_note():
    """A line on the machine's other load, for the foot of a report.

    With more runnable processes than cores, a thread that waits at a
    barrier (OpenMP's, Eigen's) loses its core for a whole time slice, so
    configurations with 2 threads per process lose far more than those with
    one: their ratios are then not to be trusted."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        return (f"WARNING: load average {load:.1f} on {cores} cores during this run: other "
                "processes competed for the cores, and runs with more threads than cores (2 threads "
                "per process, 4 ranks) suffer most. Rerun when the machine is quiet.")
    return f"load average {load:.1f} on {cores} cores"
