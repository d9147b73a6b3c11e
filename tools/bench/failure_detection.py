#!/usr/bin/env python3
"""Failure detection: time from a worker's death to every survivor's exit, against the heartbeat timeout.

Starts a local cluster of --workers processes of Strata's trainer with
--strategy=multi_worker_mirrored (each with its own TF_CONFIG on free
127.0.0.1 ports, as tests/multi_worker_test does; not through tools/launch,
whose own reaction to a dead child would end the survivors first), waits
until training is under way (the chief has saved its checkpoint of step 20),
then loses one task and times, for every survivor, the seconds from the
signal to its exit:

  kill-worker   SIGKILL to worker 1 (a non-chief task)
  stop-worker   SIGSTOP to worker 1: frozen, its sockets still open, so only
                the missing heartbeats can tell (SIGKILLed afterwards)
  kill-chief    SIGKILL to worker 0, the chief hosting the coordination service

The issue's bound (multi-worker issue, "Failure behaviour"): every surviving
task exits non-zero within heartbeat timeout + 5 s with an error naming the
lost task (/job:worker/replica:0/task:N). Each survivor's exit code and
whether its stderr names the lost task are checked and reported beside the
time. One line per measurement:

  RESULT scenario=kill-worker heartbeat_s=2 repeat=1 survivors=2 max_s=2.41 named=1 nonzero=1

  bazel build -c opt //tools:trainer
  python3 tools/bench/failure_detection.py [--quick] [--heartbeats=2,5] [--repeats=N]
      [--scenarios=kill-worker,stop-worker,kill-chief] [--workers=3]
      [--trainer=bazel-bin/tools/trainer] [--json_out=FILE]

--quick: heartbeats 2 and 5 s, one repeat each (about 15 s); the full mode:
heartbeats 2, 5 and 10 s (the trainer's default), 3 repeats each.
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import peers_common as pc

SCENARIOS = {  # name: (signal, victim task index)
    "kill-worker": (signal.SIGKILL, 1),
    "stop-worker": (signal.SIGSTOP, 1),
    "kill-chief": (signal.SIGKILL, 0),
}
SLACK_S = 5.0  # the allowance beyond the heartbeat timeout
START_STEP = 20  # the chief's checkpoint of this step means training is under way


def task_name(index):
    return f"/job:worker/replica:0/task:{index}"


def start_cluster(trainer, workers, heartbeat, tmp):
    """Starts the workers; returns (procs, stderr paths, checkpoint dir)."""
    ports = pc.free_ports(workers)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    ckpt = os.path.join(tmp, "ckpt")
    procs, errs = [], []
    # One job token for the cluster, as tools/launch makes (docs/cluster.md).
    token = os.environ.get("STRATA_JOB_TOKEN") or secrets.token_hex(32)
    for i in range(workers):
        env = dict(os.environ)
        env["STRATA_JOB_TOKEN"] = token
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        err_path = os.path.join(tmp, f"stderr_{i}.txt")
        cmd = [trainer, "--strategy=multi_worker_mirrored", f"--heartbeat_timeout={heartbeat}",
               "--startup_timeout=60", "--model=mlp", "--hidden=32", "--data=synthetic:4096:64:10",
               "--test_fraction=0", "--optimizer=sgd", "--global_batch_size=48", "--steps=100000000",
               "--prefetch=0", "--quiet", "--intra_op_threads=1", f"--checkpoint_dir={ckpt}",
               f"--save_every_steps={START_STEP}"]
        with open(err_path, "w") as err:
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err))
        errs.append(err_path)
    return procs, errs, ckpt


def tail(path, lines=6):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return ""


def measure(trainer, workers, heartbeat, scenario):
    """One loss: {'survivors': [{task, seconds, code, named}], ...}; RuntimeError when it cannot run."""
    sig, victim = SCENARIOS[scenario]
    tmp = tempfile.mkdtemp(prefix="failure_detection.")
    procs, errs, ckpt = start_cluster(trainer, workers, heartbeat, tmp)
    try:
        ready = os.path.join(ckpt, f"ckpt-{START_STEP}.index")
        deadline = time.monotonic() + 90
        while not os.path.exists(ready):
            dead = [i for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                raise RuntimeError(f"worker {dead[0]} exited {procs[dead[0]].returncode} before step "
                                   f"{START_STEP}: {tail(errs[dead[0]])}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no checkpoint of step {START_STEP} after 90 s: {tail(errs[0])}")
            time.sleep(0.01)
        lost_at = time.monotonic()
        os.kill(procs[victim].pid, sig)
        survivors = [i for i in range(workers) if i != victim]
        exited = {}
        limit = lost_at + heartbeat + 60  # a hang detector, far past the bound
        while len(exited) < len(survivors) and time.monotonic() < limit:
            for i in survivors:
                if i not in exited and procs[i].poll() is not None:
                    exited[i] = time.monotonic() - lost_at
            time.sleep(0.002)
        out = []
        for i in survivors:
            if i in exited:
                with open(errs[i], errors="replace") as f:
                    named = task_name(victim) in f.read()
                out.append({"task": i, "seconds": exited[i], "code": procs[i].returncode,
                            "named": named})
            else:
                out.append({"task": i, "seconds": None, "code": None, "named": False,
                            "why": f"still running {heartbeat + 60:.0f} s after the loss"})
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="heartbeats 2 and 5 s, one repeat")
    p.add_argument("--heartbeats", default="", help="heartbeat timeouts in seconds (default 2,5,10; --quick 2,5)")
    p.add_argument("--repeats", type=int, default=0, help="losses per scenario and timeout (default 3; --quick 1)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated")
    p.add_argument("--workers", type=int, default=3, help="tasks in the cluster (>= 2)")
    p.add_argument("--trainer", default=os.path.join(pc.ROOT, "bazel-bin/tools/trainer"))
    p.add_argument("--json_out", default="", help="also write every result to this JSON file")
    a = p.parse_args()
    heartbeats = [float(h) for h in (a.heartbeats or ("2,5" if a.quick else "2,5,10")).split(",") if h]
    repeats = a.repeats or (1 if a.quick else 3)
    scenarios = [s for s in a.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        sys.exit(f"failure_detection: unknown --scenarios {sorted(unknown)} (known: {list(SCENARIOS)})")
    if a.workers < 2 or not heartbeats or min(heartbeats) <= 0 or repeats < 1:
        sys.exit("failure_detection: need --workers >= 2, heartbeats > 0 and --repeats >= 1")
    if not os.access(a.trainer, os.X_OK):
        sys.exit(f"failure_detection: {a.trainer} is not built (bazel build -c opt //tools:trainer)")

    results, skipped = [], []
    for heartbeat in heartbeats:
        for scenario in scenarios:
            for rep in range(1, repeats + 1):
                try:
                    surv = measure(a.trainer, a.workers, heartbeat, scenario)
                except RuntimeError as e:
                    print(f"SKIP {scenario} heartbeat_s={heartbeat:g}: {e}", flush=True)
                    skipped.append({"scenario": scenario, "heartbeat_s": heartbeat, "why": str(e)})
                    break
                times = [s["seconds"] for s in surv]
                worst = None if None in times else max(times)
                r = {"scenario": scenario, "heartbeat_s": heartbeat, "repeat": rep,
                     "workers": a.workers, "survivors": surv, "max_s": worst,
                     "named": all(s["named"] for s in surv),
                     "nonzero": all(s["code"] not in (None, 0) for s in surv)}
                r["met"] = worst is not None and worst <= heartbeat + SLACK_S and r["named"] and r["nonzero"]
                results.append(r)
                max_s = "hang" if worst is None else f"{worst:.2f}"
                print(f"RESULT scenario={scenario} heartbeat_s={heartbeat:g} repeat={rep} "
                      f"survivors={len(surv)} max_s={max_s} named={int(r['named'])} "
                      f"nonzero={int(r['nonzero'])}", flush=True)

    print(f"\n## failure detection: {a.workers} workers, seconds from the signal to the last "
          f"survivor's exit (bound: heartbeat timeout + {SLACK_S:g} s)\n")
    print("| scenario | heartbeat timeout | last survivor exits after (median, max) | "
          "/ heartbeat | names the lost task, exits non-zero | target |")
    print("|---|---|---|---|---|---|")
    for heartbeat in heartbeats:
        for scenario in scenarios:
            rs = [r for r in results if r["scenario"] == scenario and r["heartbeat_s"] == heartbeat]
            if not rs:
                continue
            ts = [r["max_s"] for r in rs if r["max_s"] is not None]
            if len(ts) < len(rs):
                cell, ratio = "a survivor hung", "-"
            else:
                cell = f"{statistics.median(ts):.2f} s, {max(ts):.2f} s"
                ratio = f"{max(ts) / heartbeat:.2f}x"
            checks = "yes" if all(r["named"] and r["nonzero"] for r in rs) else "NO"
            met = "met" if all(r["met"] for r in rs) else "NOT met"
            print(f"| {scenario} | {heartbeat:g} s | {cell} | {ratio} | {checks} | "
                  f"<= {heartbeat + SLACK_S:g} s {met} |")
    print("\n" + pc.load_note())
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"workers": a.workers, "slack_s": SLACK_S, "heartbeats": heartbeats,
                       "repeats": repeats, "results": results, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
