#!/usr/bin/env python3
"""A straggler under parameter servers and under synchronous training.

One worker of two is slowed to a quarter of a CPU by a CPU quota (a cgroup:
cpu.cfs_quota_us 25000 of 100000 under cgroup v1, cpu.max "25000 100000"
under v2; the launcher's worker:1 moves itself into it before exec). Both
modes train the same MLP (64-128-64-10, synthetic 16384 x 64, 10 classes,
SGD 0.1, 32 examples a step, one intra-op thread per process) with and
without the quota:
  parameter_server       tools/launch --num_chiefs=1 --num_workers=2 --num_ps=1
                         (examples/s as the chief reports them; its
                         "steps per worker" line gives each worker's share)
  multi_worker_mirrored  tools/launch --num_workers=2 (the chief's final
                         examples/s; every step waits for both workers)
Asynchronous training should lose at most the slow worker's share of the
steps; synchronous training drops to the straggler's pace. --json_out gets
every figure. Needs root and a writable cgroup cpu controller.

  python3 tools/bench/ps_straggler.py --trainer=bazel-bin/tools/trainer --launch=bazel-bin/tools/launch
"""
import argparse
import json
import os
import re
import sys
import tempfile

import ps_throughput as pt



def make_cgroup():
    for base, quota_file, quota in (("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "25000"),
                                    ("/sys/fs/cgroup", "cpu.max", "25000 100000")):
        if not os.path.exists(os.path.join(base, quota_file)) and not os.path.exists(
                os.path.join(base, "cgroup.controllers")):
            continue
        path = os.path.join(base, "strata_straggler")
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, quota_file), "w") as f:
                f.write(quota)
            return path
        except OSError:
            continue
    raise RuntimeError("no writable cgroup cpu controller here (needs root): cannot make a straggler")


def run(a, mode, cgroup, wrapper, steps):
    env = dict(os.environ)
    env.pop("STRAGGLER_CGROUP", None)
    if cgroup:
        env["STRAGGLER_CGROUP"] = cgroup
    if mode == "ps":
        cmd = [a.launch, "--num_chiefs=1", "--num_workers=2", "--num_ps=1", "--", wrapper, a.trainer,
               "--strategy=parameter_server", f"--steps={steps}"] + pt.MODEL_FLAGS
    else:
        cmd = [a.launch, "--num_workers=2", "--", wrapper, a.trainer,
               "--strategy=multi_worker_mirrored", f"--steps={steps}"] + pt.MODEL_FLAGS
    text, rate = pt.run_cluster(cmd, mode, env=env)
    out = {"examples_per_sec": rate}
    m = re.search(r"steps per worker: ([0-9]+), ([0-9]+)", text)
    if m:
        out["steps_per_worker"] = [int(m.group(1)), int(m.group(2))]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trainer", required=True)
    p.add_argument("--launch", required=True)
    p.add_argument("--json_out", default="")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    cgroup = make_cgroup()
    steps = {"ps": 1500 if a.quick else 3000, "sync": 300 if a.quick else 600}
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = os.path.join(tmp, "straggle.sh")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    "if [ \"$STRATA_TASK\" = worker:1 ] && [ -n \"$STRAGGLER_CGROUP\" ]; then\n"
                    "  echo $$ > \"$STRAGGLER_CGROUP/cgroup.procs\"\n"
                    "fi\n"
                    "exec \"$@\"\n")
        os.chmod(wrapper, 0o755)
        for mode in ("ps", "sync"):
            base = run(a, mode, "", wrapper, steps[mode])
            slow = run(a, mode, cgroup, wrapper, steps[mode])
            result[mode] = {"base": base, "straggler": slow,
                            "kept": slow["examples_per_sec"] / base["examples_per_sec"]}
            print(f"{mode}: {base['examples_per_sec']:.0f} -> {slow['examples_per_sec']:.0f} examples/s "
                  f"with worker 1 at a quarter CPU ({result[mode]['kept']:.2f} kept)"
                  + (f"; steps per worker {base.get('steps_per_worker')} -> {slow.get('steps_per_worker')}"
                     if mode == "ps" else ""), flush=True)
    try:
        os.rmdir(cgroup)
    except OSError:
        pass
    ps = result["ps"]
    share = ps["base"]["steps_per_worker"][1] / sum(ps["base"]["steps_per_worker"])
    result["slow_worker_share"] = share
    result["ps_bound"] = 1 - share
    print(f"parameter servers kept {ps['kept']:.2f} (bound: 1 - its share {share:.2f} = {1 - share:.2f}); "
          f"synchronous kept {result['sync']['kept']:.2f}", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
