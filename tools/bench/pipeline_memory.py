#!/usr/bin/env python3
"""A model too large for one process's memory limit: pipelined over 2 hosts it trains, data-parallel it cannot.

Two simulated hosts (network namespaces joined by a veth pair, MTU 1500:
tools/bench/netns_hosts.py), one worker process on each with 2 virtual CPU
devices and a memory limit (`tests/pipeline_worker --memory_limit_mb`: the
devices' allocators refuse, with ResourceExhausted, what would take the
process past it). The model: an MLP 12-H-H-H-H-H-5 (five hidden layers of
H units; --hidden), trained with SGD on synthetic data:
  pipelined      4 stages over the 2 hosts (stage s on device s % 2 of
                 worker s / 2, stage starts 0,2,3,4: one H x H layer each),
                 4 micro-batches, 1F1B, activations and gradients crossing
                 the link over TCP;
  data parallel  MultiWorkerMirroredStrategy, both devices of both workers
                 a replica holding the whole model.
Target (issue 25, P2): with the same limit, the pipelined run trains every
step (its loss falls) while the data-parallel one fails with
ResourceExhausted. Each run's peak allocation per device is reported.

Needs root and iproute2 (`ip netns`); the result says why it could not run.

  python3 tools/bench/pipeline_memory.py [--quick] [--hidden=1024] [--memory_limit_mb=40]
      [--worker=bazel-bin/tests/pipeline_worker] [--json_out=FILE]
"""
import argparse
import json
import os
import re
import secrets
import subprocess
import sys

import netns_hosts
import peers_common as pc

PORT = 24650


def run_pair(hosts, worker, flags):
    """Both workers' (exit code, stdout, stderr)."""
    cluster = {"worker": [f"{hosts.addr(i)}:{PORT}" for i in range(2)]}
    env = dict(os.environ, STRATA_JOB_TOKEN=secrets.token_hex(32))
    procs = []
    for i in range(2):
        env_i = dict(env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
        procs.append(subprocess.Popen(hosts.exec(i, [worker, "--transport=tcp"] + flags), env=env_i,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            e += "\n(killed after 600 s)"
        out.append((p.returncode, o, e))
    return out


def summarize(results):
    """The run's losses, peaks per device (MB) and errors, from both workers."""
    losses, peaks, errors = [], {}, []
    for i, (code, out, err) in enumerate(results):
        if i == 0:
            losses = [float(m) for m in re.findall(r"^step \d+ loss (\S+)", out, re.M)]
        for dev, mb in re.findall(r"^peak (\S+) (\S+) MB", out, re.M):
            peaks[dev] = float(mb)
        if code != 0:  # the worker's own last line ("pipeline_worker: CODE: ..."), else its last line
            lines = err.strip().splitlines() or [""]
            mine = [l for l in lines if l.startswith("pipeline_worker: ")]
            errors.append(f"worker {i} exit {code}: " + (mine or lines)[-1])
    return {"losses": losses, "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None, "steps": len(losses),
            "peak_mb": peaks, "errors": errors}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer steps")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--memory_limit_mb", type=int, default=40, help="per worker process")
    p.add_argument("--worker", default=os.path.join(pc.ROOT, "bazel-bin/tests/pipeline_worker"))
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    steps = 10 if a.quick else 30
    if not os.access(a.worker, os.X_OK):
        sys.exit(f"{a.worker} is not built (bazel build -c opt //tests:pipeline_worker)")
    why = netns_hosts.check()
    h = a.hidden
    result = {"model": f"12-{'-'.join([str(h)] * 5)}-5", "parameters": 12 * h + 4 * h * h + 5 * h + 5 * h + 5,
              "memory_limit_mb": a.memory_limit_mb, "steps": steps, "skipped": why or ""}
    if not why:
        common = [f"--steps={steps}", f"--hidden={h}", "--hidden_layers=5",
                  f"--memory_limit_mb={a.memory_limit_mb}"]
        with netns_hosts.NetnsHosts(2, mtu=1500) as hosts:
            result["pipelined"] = summarize(run_pair(
                hosts, a.worker, common + ["--stage_starts=0,2,3,4", "--micro_batches=4", "--schedule=1f1b"]))
            result["data_parallel"] = summarize(run_pair(hosts, a.worker, common + ["--data_parallel"]))
        pl, dp = result["pipelined"], result["data_parallel"]
        result["met"] = (not pl["errors"] and pl["steps"] == steps and pl["last_loss"] < pl["first_loss"]
                         and any("RESOURCE_EXHAUSTED" in e for e in dp["errors"]))
    print(f"model {result['model']} ({result['parameters'] * 4 / 1e6:.1f} MB of float32 weights), "
          f"{a.memory_limit_mb} MB per worker process (2 devices), 2 hosts")
    for mode in ("pipelined", "data_parallel"):
        r = result.get(mode)
        if r:
            print(f"{mode}: {r['steps']} steps, loss {r['first_loss']} -> {r['last_loss']}; "
                  f"peak MB per device {r['peak_mb']}; errors: {r['errors'] or 'none'}")
    if why:
        print(f"skipped: {why}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
