"""run_graph against TensorFlow's own numbers, through numpy's .npy files.

For each interop case with expected values (tests/testdata/tf_interop), saves
the feeds with numpy.save, runs run_graph, loads every fetch with numpy.load
and compares it with what TensorFlow computed. Then the failures: a truncated
feed file, an unknown fetch, bad usage.

Usage: run_graph_test.py <run_graph binary> <testdata dir> <tmp dir>
"""
import os
import subprocess
import sys

import numpy as np
from tensorboard.compat.proto import graph_pb2
from tensorboard.util import tensor_util

run_graph, data, tmp = sys.argv[1:4]


def load_box(path):
    box = graph_pb2.GraphDef()
    with open(path, "rb") as f:
        box.ParseFromString(f.read())
    return box


def run(args):
    return subprocess.run([run_graph] + args, capture_output=True, text=True)


compared = 0
cases = sorted(f[: -len(".expected.pb")] for f in os.listdir(data) if f.endswith(".expected.pb"))
assert "keras_cnn" in cases and "keras_mha" in cases, cases
for case in cases:
    box = load_box(os.path.join(data, case + ".expected.pb"))
    args = ["--graph=" + os.path.join(data, case + ".pb"), "--out_dir=" + os.path.join(tmp, case)]
    want = {}
    for n in box.node:
        value = tensor_util.make_ndarray(n.attr["value"].tensor) if n.op != "target" else None
        if n.op == "feed":
            path = os.path.join(tmp, f"{case}.{n.name.replace('/', '_').replace(':', '_')}.npy")
            np.save(path, value)
            args.append(f"--feed={n.name}={path}")
        elif n.op == "fetch":
            args.append("--fetch=" + n.name)
            want[n.name] = value
        else:
            args.append("--target=" + n.name)
    r = run(args)
    assert r.returncode == 0, (case, r.stderr)
    for name, value in want.items():
        got = np.load(os.path.join(tmp, case, name.replace("/", "_").replace(":", "_") + ".npy"))
        assert got.dtype == value.dtype and got.shape == value.shape, (case, name, got.dtype, got.shape, value.shape)
        if value.dtype.kind == "f":
            assert np.allclose(got, value, rtol=1e-5, atol=1e-6), (case, name, np.abs(got - value).max())
        else:
            assert np.array_equal(got, value), (case, name)
        compared += 1
assert compared > 50, compared

# A truncated feed: exit 1, the file named.
good = os.path.join(tmp, "x.npy")
np.save(good, np.zeros((3, 8, 8, 3), np.float32))
bad = os.path.join(tmp, "truncated.npy")
with open(good, "rb") as f, open(bad, "wb") as g:
    g.write(f.read()[:-7])
cnn = "--graph=" + os.path.join(data, "keras_cnn.pb")
r = run([cnn, "--feed=x=" + bad, "--fetch=Identity", "--out_dir=" + tmp])
assert r.returncode == 1 and "truncated.npy" in r.stderr, r.stderr
# A feed of the wrong dtype reaches the session, which names the placeholder.
wrong = os.path.join(tmp, "wrong.npy")
np.save(wrong, np.zeros((3, 8, 8, 3), np.float64))
r = run([cnn, "--feed=x=" + wrong, "--fetch=Identity", "--out_dir=" + tmp])
assert r.returncode == 1 and "x" in r.stderr, r.stderr
# An unknown fetch is named.
r = run([cnn, "--feed=x=" + good, "--fetch=no_such_node", "--out_dir=" + tmp])
assert r.returncode == 1 and "no_such_node" in r.stderr, r.stderr
# Bad usage.
r = run([cnn, "--fetch=Identity"])
assert r.returncode == 2 and "--out_dir" in r.stderr, r.stderr
print(f"run_graph_test: {compared} fetches of {len(cases)} graphs match TensorFlow")
