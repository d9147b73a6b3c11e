#!/usr/bin/env python3
"""TensorFlow peer of `tools/trainer --strategy=mirrored` for throughput comparisons.

tf.distribute.MirroredStrategy over N logical CPU devices (the physical CPU
split with tf.config.set_logical_device_configuration), training the same
MLP as Strata's trainer (Dense+ReLU hidden layers, a Dense logits layer,
Glorot-uniform kernels, zero biases, sparse softmax cross-entropy, SGD) on
the same kind of synthetic data (features N(0, 1), label = argmax of a fixed
random linear map), with the global batch split over the replicas. The step
is TensorFlow's documented custom loop: a tf.function calling strategy.run,
per-replica loss scaled by the global batch (tf.nn.compute_average_loss),
the Keras optimizer all-reducing the gradients in apply_gradients, the mean
loss read back as a Python float every step. Input comes from
strategy.experimental_distribute_dataset over a repeated, shuffled,
prefetched tf.data pipeline of global batches. Prints one JSON line:

  {"framework": "tensorflow", "examples_per_sec": ..., "step_ms": ...,
   "cpu_ms_per_step": ..., ...}

(cpu_ms_per_step: the process's CPU time over the timed steps, all threads.)

Threads: --intra_op_threads and --inter_op_threads go to tf.config.threading
before TensorFlow starts (e.g. 2 and 2 on a 2-core machine: the same cores as
Strata's 2 devices x 1 intra-op thread + 1 inter-op thread per replica).

  python3 tools/bench/tf_mirrored_train.py --devices=2 --batch=256 --intra_op_threads=2
"""
import argparse
import json
import os
import time


def synthetic_data(a):
    """The examples both TensorFlow benchmarks train on: x ~ N(0, 1), the label
    the argmax of a fixed random linear map (the same on every worker)."""
    import numpy as np
    rng = np.random.default_rng(a.seed)
    x = rng.standard_normal((a.examples, a.features), dtype=np.float32)
    w = rng.standard_normal((a.features, a.classes), dtype=np.float32)
    return x, np.argmax(x @ w, axis=1).astype(np.int32)


def make_train_step(tf, strategy, a):
    """The MLP (--hidden, ReLU), SGD and a tf.function step under `strategy`
    (MirroredStrategy here, MultiWorkerMirroredStrategy in tf_mwms_train)."""
    hidden = [int(h) for h in a.hidden.split(",") if h]
    with strategy.scope():
        layers = [tf.keras.layers.Dense(h, activation="relu") for h in hidden]
        layers.append(tf.keras.layers.Dense(a.classes))
        model = tf.keras.Sequential([tf.keras.Input((a.features,))] + layers)
        optimizer = tf.keras.optimizers.SGD(learning_rate=a.learning_rate)
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    def replica_step(inputs):
        bx, by = inputs
        with tf.GradientTape() as tape:
            logits = model(bx, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(by, logits), global_batch_size=a.batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(inputs):
        per_replica = strategy.run(replica_step, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
    return train_step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=2, help="logical CPU devices = replicas")
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--examples", type=int, default=16384)
    p.add_argument("--batch", type=int, default=256, help="global batch")
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--intra_op_threads", type=int, default=2)
    p.add_argument("--inter_op_threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first (tracing, allocation)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.batch % a.devices != 0:
        raise SystemExit(f"--batch={a.batch} does not split over {a.devices} replicas")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.intra_op_threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.inter_op_threads)
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(a.devices)])
    devices = [f"/cpu:{i}" for i in range(a.devices)]
    strategy = tf.distribute.MirroredStrategy(devices)

    x, y = synthetic_data(a)
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(a.examples, seed=a.seed)
          .repeat().batch(a.batch, drop_remainder=True).prefetch(2))
    dist_ds = iter(strategy.experimental_distribute_dataset(ds))

    train_step = make_train_step(tf, strategy, a)

    for _ in range(a.warmup):
        float(train_step(next(dist_ds)))
    t0, c0 = time.perf_counter(), time.process_time()
    loss = 0.0
    for _ in range(a.steps):
        loss = float(train_step(next(dist_ds)))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({
        "framework": "tensorflow", "version": tf.__version__, "replicas": a.devices,
        "cross_device_ops": type(strategy.extended._cross_device_ops).__name__,
        "examples_per_sec": a.steps * a.batch / dt, "step_ms": 1000 * dt / a.steps,
        "cpu_ms_per_step": 1000 * cpu / a.steps,
        "final_loss": loss, "intra_op_threads": a.intra_op_threads,
        "inter_op_threads": a.inter_op_threads}))


if __name__ == "__main__":
    main()
