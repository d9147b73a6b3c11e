#!/usr/bin/env python3
"""A tensor's round trip between two tasks' partitions: Strata beside TensorFlow.

Strata: runtime/remote_rendezvous_bench (two sessions spanning two tasks over
TCP on loopback, one process). TensorFlow: tf_remote_tensor.py (two
tf.distribute.Server tasks, gRPC on loopback, one process, a tf.function).
Both move n floats task 0 -> task 1 -> task 0 per step; the medians per size
and their ratio (TensorFlow's time / Strata's) go to --json_out.

  python3 tools/bench/remote_tensor_peers.py --bench=bazel-bin/runtime/remote_rendezvous_bench
"""
import argparse
import json
import os
import subprocess
import sys

import peers_common as pc

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="the remote_rendezvous_bench binary")
    p.add_argument("--json_out", default="")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    sizes = ",".join(str(s) for s in SIZES)
    strata_json = a.json_out + ".strata.json" if a.json_out else "/tmp/remote_tensor_strata.json"
    subprocess.run([a.bench, f"--sizes={sizes}", f"--out={strata_json}"], check=True, timeout=600)
    with open(strata_json) as f:
        strata = {r["bytes"]: r["strata_us"] for r in json.load(f)}
    tf_python = pc.find_tf_python()
    if tf_python is None:
        raise SystemExit("no python3 here imports tensorflow: run tools/setup.sh --peers")
    r = subprocess.run([tf_python, os.path.join(pc.BENCH_DIR, "tf_remote_tensor.py"), f"--sizes={sizes}",
                        f"--seconds={0.2 if a.quick else 1.0}"],
                       capture_output=True, text=True, timeout=900)
    tf = {x["bytes"]: x["time_us"] for x in pc.parse_results(r.stdout)}
    if r.returncode != 0 or not tf:
        raise SystemExit("tensorflow: " + " | ".join(r.stderr.strip().splitlines()[-6:]))
    rows = []
    for n in SIZES:
        rows.append({"bytes": n, "strata_us": strata[n], "tf_us": tf[n], "ratio": tf[n] / strata[n]})
        print(f"{n:10d} bytes: strata {strata[n]:9.1f} us, tensorflow {tf[n]:9.1f} us, "
              f"tensorflow / strata {tf[n] / strata[n]:.1f}x", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"results": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
