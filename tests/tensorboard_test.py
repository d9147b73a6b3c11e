"""Reads a Fit run's TensorBoard files with TensorBoard's own loader.

Usage: tensorboard_test.py DIR METRICS.jsonl UPDATE_STEPS [DIR2 METRICS2.jsonl]...
  (the first run's batch scalars are every UPDATE_STEPS steps; later runs'
  every step)

Checks, for each run: DIR/train and DIR/validation each hold one event file
(the chief's alone); every record passes TensorBoard's checksums; the tags
are Keras's (batch_loss, batch_learning_rate, batch_examples_per_sec,
epoch_loss, epoch_learning_rate, epoch_examples_per_sec; validation
epoch_loss and epoch_mse); each value equals the run's JSON-lines metrics
(as float32), at Keras's steps (global step, epoch - 1).
"""
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator, event_file_loader


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)


def scalars(directory):
    files = [f for f in os.listdir(directory) if "tfevents" in f]
    if len(files) != 1:
        fail(f"{directory}: expected one event file (the chief's), found {files}")
    # Every record through TensorBoard's checksumming reader.
    path = os.path.join(directory, files[0])
    records = list(event_file_loader.EventFileLoader(path).Load())
    if not records or records[0].file_version != "brain.Event:2":
        fail(f"{path}: no file_version record first")
    acc = event_accumulator.EventAccumulator(directory, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def check_run(directory, metrics_path, update_steps):
    lines = [json.loads(l) for l in open(metrics_path)]
    steps = {l["step"]: l for l in lines if "loss" in l and "epoch" not in l and "final" not in l}
    epochs = [l for l in lines if "epoch" in l]
    if not epochs:
        fail(f"{metrics_path}: no epoch lines")

    train = scalars(os.path.join(directory, "train"))
    want = {"batch_loss", "batch_learning_rate", "batch_examples_per_sec",
            "epoch_loss", "epoch_learning_rate", "epoch_examples_per_sec"}
    if set(train) != want:
        fail(f"{directory}/train tags {sorted(train)}, want {sorted(want)}")
    batch = train["batch_loss"]
    want_steps = [s for s in sorted(steps) if s % update_steps == 0]
    if [s for s, _ in batch] != want_steps:
        fail(f"batch_loss at steps {[s for s, _ in batch]}, want {want_steps}")
    for s, v in batch:
        if not close(v, float(_f32(steps[s]["loss"]))):
            fail(f"batch_loss at step {s}: {v} vs metrics {steps[s]['loss']}")
    for s, v in train["batch_learning_rate"]:
        if not v > 0:
            fail(f"batch_learning_rate at {s} is {v}")
    for s, v in train["batch_examples_per_sec"]:
        if not v > 0:
            fail(f"batch_examples_per_sec at {s} is {v}")
    got = [(s, v) for s, v in train["epoch_loss"]]
    if [s for s, _ in got] != [e["epoch"] - 1 for e in epochs]:
        fail(f"epoch_loss at {[s for s, _ in got]}, want epochs - 1 of {[e['epoch'] for e in epochs]}")
    for (s, v), e in zip(got, epochs):
        if not close(v, _f32(e["loss"])):
            fail(f"epoch_loss at {s}: {v} vs metrics {e['loss']}")

    val = scalars(os.path.join(directory, "validation"))
    if set(val) != {"epoch_loss", "epoch_mse"}:
        fail(f"{directory}/validation tags {sorted(val)}")
    for tag, key in (("epoch_loss", "val_loss"), ("epoch_mse", "val_mse")):
        for (s, v), e in zip(val[tag], epochs):
            if s != e["epoch"] - 1 or not close(v, _f32(e[key])):
                fail(f"validation {tag} at {s}: {v} vs metrics {key} {e[key]} (epoch {e['epoch']})")
    print(f"ok: {directory}: {len(batch)} batch and {len(got)} epoch scalars match {metrics_path}")


def _f32(x):
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def main(argv):
    check_run(argv[1], argv[2], int(argv[3]))
    for i in range(4, len(argv), 2):
        check_run(argv[i], argv[i + 1], 1)


if __name__ == "__main__":
    main(sys.argv)
