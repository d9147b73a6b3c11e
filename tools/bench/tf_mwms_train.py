#!/usr/bin/env python3
"""TensorFlow MultiWorkerMirroredStrategy peer of Strata's multi-worker trainer.

--workers processes on this host, each a TensorFlow worker configured the
documented way, through TF_CONFIG ({"cluster": {"worker": ["127.0.0.1:P0",
...]}, "task": {"type": "worker", "index": i}}, free loopback ports), with
--intra_op_threads and --inter_op_threads each (1 and 1 by default: one core
per worker). They train the model of tools/bench/tf_mirrored_train.py (MLP,
Glorot-uniform kernels, zero biases, sparse softmax cross-entropy, SGD) on
the same kind of synthetic data with the same step: a tf.function calling
strategy.run, the per-replica loss scaled by the global batch, the Keras
optimizer all-reducing the gradients (MWMS's default collective
implementation), the mean loss read back as a Python float every step.
Input: strategy.distribute_datasets_from_function, each worker reading its
own shard (Dataset.shard by input pipeline) in per-replica batches,
shuffled, repeated, prefetched. Throughput is global batch x timed steps /
the slowest worker's wall time over them. Prints one line:

  RESULT impl=tf-mwms workers=2 examples_per_s=9000

--workers=1 runs one worker without TF_CONFIG (MWMS on a single worker).

  python3 tools/bench/tf_mwms_train.py --workers=2
"""
import argparse
import json
import os
import sys
import time

import peers_common as pc
import tf_mirrored_train as tfm


def train(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.inter_op_threads)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG

    x, y = tfm.synthetic_data(a)  # the same data on every worker; shards differ

    def dataset_fn(ctx):
        per_replica = ctx.get_per_replica_batch_size(a.batch)
        return (tf.data.Dataset.from_tensor_slices((x, y))
                .shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
                .shuffle(a.examples, seed=a.seed).repeat()
                .batch(per_replica, drop_remainder=True).prefetch(2))

    dist_ds = iter(strategy.distribute_datasets_from_function(dataset_fn))
    train_step = tfm.make_train_step(tf, strategy, a)

    for _ in range(a.warmup):
        float(train_step(next(dist_ds)))
    t0 = time.perf_counter()
    loss = 0.0
    for _ in range(a.steps):
        loss = float(train_step(next(dist_ds)))
    dt = time.perf_counter() - t0
    print(json.dumps({"worker": a.worker_index, "seconds": dt, "final_loss": loss,
                      "replicas": strategy.num_replicas_in_sync, "tensorflow": tf.__version__}),
          flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker_index", type=int, default=-1, help="internal: this worker; -1: start all")
    p.add_argument("--intra_op_threads", type=int, default=1)
    p.add_argument("--inter_op_threads", type=int, default=1)
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--examples", type=int, default=16384)
    p.add_argument("--batch", type=int, default=256, help="global batch")
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first (tracing, allocation)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=600, help="seconds, when starting the workers")
    a = p.parse_args()
    if a.workers < 1 or a.batch % a.workers != 0:
        sys.exit(f"tf_mwms_train: --batch={a.batch} does not split over --workers={a.workers}")
    if a.worker_index >= 0:
        train(a)
        return

    envs = [{"TF_CPP_MIN_LOG_LEVEL": "2"} for _ in range(a.workers)]
    if a.workers > 1:
        cluster = {"worker": [f"127.0.0.1:{port}" for port in pc.free_ports(a.workers)]}
        for i, e in enumerate(envs):
            e["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
    passthrough = [arg for arg in sys.argv[1:] if not arg.startswith("--worker_index")]
    cmds = [[sys.executable, os.path.abspath(__file__)] + passthrough + [f"--worker_index={i}"]
            for i in range(a.workers)]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    try:
        outs = pc.run_ranks(cmds, env=env, envs=envs, timeout=a.timeout)
    except RuntimeError as e:
        sys.exit(f"tf_mwms_train: {e}")
    reports = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    slowest = max(r["seconds"] for r in reports)
    print(pc.train_result("tf-mwms", a.workers, a.steps * a.batch / slowest), flush=True)
    print(f"final loss {reports[0]['final_loss']:.4f}, {reports[0]['replicas']} replicas, "
          f"tensorflow {reports[0]['tensorflow']}", file=sys.stderr)


if __name__ == "__main__":
    main()
