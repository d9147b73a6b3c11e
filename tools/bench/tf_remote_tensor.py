"""TensorFlow's side of remote_tensor_peers.py: a tensor's round trip between two tasks.

Two tf.distribute.Server tasks of one cluster in this process (gRPC on
loopback, as the Strata side's two sessions over TCP), this process
connected to the cluster; a tf.function reads a variable of n floats on
task 0, copies it on task 1 (tf.identity) and back on task 0, and returns
one element (so that nothing large reaches the client). One step is one call.

  python3 tf_remote_tensor.py --sizes=4096,1048576

Prints "RESULT impl=tensorflow bytes=N time_us=T" per size (the median).
"""
import argparse
import os
import socket
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="4096,65536,1048576,16777216")
    p.add_argument("--seconds", type=float, default=0.5, help="about this long per size")
    a = p.parse_args()
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]})
    servers = [tf.distribute.Server(cluster, job_name="worker", task_index=i, start=True)
               for i in range(2)]
    tf.config.experimental_connect_to_cluster(cluster)
    t0, t1 = "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"
    for n in (int(x) for x in a.sizes.split(",")):
        with tf.device(t0):
            v = tf.Variable(tf.fill([n // 4], 1.5))

        @tf.function
        def step():
            with tf.device(t1):
                y = tf.identity(v.read_value())
            with tf.device(t0):
                return tf.identity(y)[0]

        for _ in range(3):
            step().numpy()
        start = time.perf_counter()
        step().numpy()
        iters = max(5, min(2000, int(a.seconds / max(time.perf_counter() - start, 1e-6))))
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            step().numpy()
            times.append((time.perf_counter() - start) * 1e6)
        print(f"RESULT impl=tensorflow bytes={n} time_us={statistics.median(times):.1f}", flush=True)
    del servers


if __name__ == "__main__":
    main()
