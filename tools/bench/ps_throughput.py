#!/usr/bin/env python3
"""Parameter-server training throughput: Strata's trainer beside TensorFlow's ParameterServerStrategy.

Both train the same MLP (64-128-64-10 on synthetic data of 64 features and 10
classes, 16384 examples), plain SGD at 0.1, one closure = one step of a
32-example batch on one worker, with a chief coordinating, 2 workers and 1
ps task, every process on this host with one intra-op thread:
  Strata      tools/launch --num_chiefs=1 --num_workers=2 --num_ps=1 --
              tools/trainer --strategy=parameter_server ...; examples/s as the
              chief reports it over the whole run (its per-epoch test
              evaluation included)
  TensorFlow  tools/bench/tf_ps_train.py (tf.distribute.Server tasks, a
              ClusterCoordinator scheduling every step, then join())
Rounds alternate the two; medians and their ratio go to --json_out.

  python3 tools/bench/ps_throughput.py --trainer=bazel-bin/tools/trainer --launch=bazel-bin/tools/launch
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import peers_common as pc


# The model, data and threads of both parameter-server benchmarks
# (ps_straggler.py too).
MODEL_FLAGS = ["--data=synthetic:16384:64:10", "--hidden=128,64", "--optimizer=sgd",
               "--learning_rate=0.1", "--global_batch_size=32", "--intra_op_threads=1",
               "--prefetch=0", "--insecure_no_job_token"]


def run_cluster(cmd, what, env=None):
    """Runs a launch command line; its output, and the last examples/s it reports."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    text = r.stdout + r.stderr
    rates = re.findall(r"([0-9.]+) examples/s", text)
    if r.returncode != 0 or not rates:
        raise RuntimeError(f"{what}: " + " | ".join(text.strip().splitlines()[-6:]))
    return text, float(rates[-1])


def strata_run(a, steps):
    cmd = [a.launch, "--num_chiefs=1", "--num_workers=2", "--num_ps=1", "--", a.trainer,
           "--strategy=parameter_server", f"--steps={steps}"] + MODEL_FLAGS
    return run_cluster(cmd, "strata")[1]


def tf_run(a, tf_python, steps):
    r = subprocess.run([tf_python, os.path.join(pc.BENCH_DIR, "tf_ps_train.py"), f"--steps={steps}"],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode != 0 or not lines:
        raise SystemExit("tensorflow: " + " | ".join(r.stderr.strip().splitlines()[-6:]))
    d = json.loads(lines[-1])
    return d["examples_per_sec"], d["tensorflow"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trainer", required=True)
    p.add_argument("--launch", required=True)
    p.add_argument("--json_out", default="")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    tf_python = pc.find_tf_python()
    if tf_python is None:
        raise SystemExit("no python3 here imports tensorflow: run tools/setup.sh --peers")
    steps = 1000 if a.quick else 3000
    rounds = 1 if a.quick else a.rounds
    ours, theirs, version = [], [], ""
    for i in range(rounds):
        ours.append(strata_run(a, steps))
        t, version = tf_run(a, tf_python, steps)
        theirs.append(t)
        print(f"round {i + 1}: strata {ours[-1]:.0f} examples/s, tensorflow {theirs[-1]:.0f}",
              flush=True)
    s, t = statistics.median(ours), statistics.median(theirs)
    result = {"steps": steps, "rounds": rounds, "strata": ours, "tensorflow": theirs,
              "strata_median": s, "tf_median": t, "ratio": s / t, "tf_version": version}
    print(f"strata / tensorflow: {s / t:.2f}x", flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
