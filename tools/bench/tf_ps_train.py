#!/usr/bin/env python3
"""TensorFlow ParameterServerStrategy peer of `tools/trainer --strategy=parameter_server`.

A cluster on this host configured the documented way: --workers worker
processes and --ps ps processes, each a tf.distribute.Server of the cluster
{"chief": [...], "worker": [...], "ps": [...]} on free loopback ports (one
intra-op and one inter-op thread each), and this process the chief: a
tf.distribute.ParameterServerStrategy from a SimpleClusterResolver and a
tf.distribute.coordinator.ClusterCoordinator. The model is the trainer's MLP
(Dense+ReLU hidden layers, a Dense logits layer, Glorot-uniform kernels,
zero biases) as tf.Variables made under strategy.scope() (round-robin on
the ps tasks), sparse softmax cross-entropy, plain SGD (var.assign_sub)
applied on the ps tasks; the data the trainer's synthetic source makes in
kind (features N(0, 1), label the argmax of a fixed random linear map),
each worker's own dataset from coordinator.create_per_worker_dataset
(shuffled, repeated, batched, prefetched). One closure = one step of --batch
examples on one worker, as in Strata's trainer. Timed: --steps closures
scheduled at once, then join(), after --warmup untimed ones. Prints:

  {"framework": "tensorflow-pss", "examples_per_sec": ..., "tensorflow": "2.21.0"}

  python3 tools/bench/tf_ps_train.py --workers=2 --ps=1 --steps=2000
"""
import argparse
import json
import os
import subprocess
import sys
import time

import peers_common as pc


def serve(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    cluster = tf.train.ClusterSpec(json.loads(a.cluster))
    server = tf.distribute.Server(cluster, job_name=a.job, task_index=a.index, protocol="grpc",
                                  start=True)
    server.join()


def coordinate(a, cluster):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    rng = np.random.default_rng(a.seed)
    x = rng.standard_normal((a.examples, a.features), dtype=np.float32)
    w = rng.standard_normal((a.features, a.classes), dtype=np.float32)
    y = np.argmax(x @ w, axis=1).astype(np.int32)

    sizes = [a.features] + [int(h) for h in a.hidden.split(",") if h] + [a.classes]
    glorot = tf.keras.initializers.GlorotUniform(seed=a.seed)
    with strategy.scope():
        params = []
        for i in range(len(sizes) - 1):
            params.append(tf.Variable(glorot((sizes[i], sizes[i + 1])), name=f"kernel{i}"))
            params.append(tf.Variable(tf.zeros((sizes[i + 1],)), name=f"bias{i}"))

    def dataset_fn():
        return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(a.examples, seed=a.seed)
                .repeat().batch(a.batch, drop_remainder=True).prefetch(2))

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(lambda _: dataset_fn())

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def train_step(it):
        def replica_fn(xb, yb):
            with tf.GradientTape() as tape:
                h = xb
                for i in range(0, len(params), 2):
                    h = tf.matmul(h, params[i]) + params[i + 1]
                    if i + 2 < len(params):
                        h = tf.nn.relu(h)
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=h))
            grads = tape.gradient(loss, params)
            for p, g in zip(params, grads):
                p.assign_sub(a.learning_rate * g)
            return loss
        xb, yb = next(it)
        return strategy.run(replica_fn, args=(xb, yb))

    for _ in range(a.warmup):
        coordinator.schedule(train_step, args=(iterator,))
    coordinator.join()
    t0 = time.perf_counter()
    last = None
    for _ in range(a.steps):
        last = coordinator.schedule(train_step, args=(iterator,))
    coordinator.join()
    dt = time.perf_counter() - t0
    loss = float(last.fetch())
    return {"framework": "tensorflow-pss", "examples_per_sec": a.steps * a.batch / dt,
            "seconds": dt, "final_loss": loss, "tensorflow": tf.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", default="128,64")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--examples", type=int, default=16384)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=2000, help="timed closures")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    # internal: run one server of the cluster
    p.add_argument("--cluster", default="")
    p.add_argument("--job", default="")
    p.add_argument("--index", type=int, default=0)
    a = p.parse_args()
    if a.job:
        serve(a)
        return
    ports = pc.free_ports(1 + a.workers + a.ps)
    addr = [f"127.0.0.1:{port}" for port in ports]
    cluster = {"chief": addr[:1], "worker": addr[1:1 + a.workers], "ps": addr[1 + a.workers:]}
    servers = []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    for job in ("worker", "ps"):
        for i in range(len(cluster[job])):
            servers.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), f"--cluster={json.dumps(cluster)}",
                 f"--job={job}", f"--index={i}"], env=env, stdout=subprocess.DEVNULL))
    try:
        print(json.dumps(coordinate(a, cluster)), flush=True)
    finally:
        for s in servers:
            s.kill()
            s.wait()


if __name__ == "__main__":
    main()
