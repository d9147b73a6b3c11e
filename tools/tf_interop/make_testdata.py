#!/usr/bin/env python3
"""Makes the TensorFlow interop test data in tests/testdata/tf_interop/.

For each case, builds a graph with real TensorFlow in tf.compat.v1 graph mode
(plain ops only, no variables or functions), runs it on fixed inputs, and
writes:

  <case>.pb           the binary GraphDef (deterministic serialization)
  <case>.expected.pb  a GraphDef used as a container of tensors, not a graph:
                      one node per tensor, op "feed" or "fetch", the node name
                      the tensor name in Strata's form ("x", "loss:1"), the
                      tensor in attr "value" (a TensorProto). Fetches are in
                      the order the test should pass them to Session::Run.

A case without an .expected.pb (random ops) is only imported, not run.

Usage:  python3 tools/tf_interop/make_testdata.py [--out DIR]
The output is deterministic for a given TensorFlow version.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
# protobuf's pure-Python implementation sorts map keys the way C++'s
# deterministic serialization does (upb, the default, orders them otherwise),
# so the .pb files are byte-for-byte what Strata's export writes.
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import attr_value_pb2  # noqa: E402
from tensorflow.core.framework import graph_pb2  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)

tf1 = tf.compat.v1

# The ops Strata registers (graph/ops/*.cc). A graph using any other op would
# not import, so make_case refuses it.
STRATA_OPS = {
    "Const", "Placeholder", "Identity", "NoOp",
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Neg", "Square", "Sqrt", "Rsqrt",
    "Exp", "Log", "Pow", "Maximum", "Minimum", "AddN", "MatMul",
    "Sum", "Mean", "Max", "Min", "ArgMax", "Equal", "Select", "SelectV2", "Cast",
    "Reshape", "Transpose", "ConcatV2", "Slice", "Pack", "Fill", "ZerosLike",
    "OnesLike", "Shape", "OneHot",
    "BiasAdd", "Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
    "SparseSoftmaxCrossEntropyWithLogits", "Conv2D", "MaxPool",
    "RandomUniform", "RandomStandardNormal", "TruncatedNormal",
    "StridedSlice", "AvgPool", "Erf", "Erfc", "GatherV2", "Less", "Squeeze",
    "ExpandDims", "Prod", "MatrixBandPart", "LogicalAnd", "SquaredDifference",
    "StopGradient", "BatchMatMulV2", "ClipByValue", "Einsum", "Tanh",
    "FusedBatchNormV3",
}


def strata_name(t):
    """TF tensor name "n:0" -> Strata's "n"; "n:1" stays."""
    node, idx = t.name.rsplit(":", 1)
    return node if idx == "0" else t.name


def clean_graph_def(gd):
    """Drops TF-internal bookkeeping attrs ("_class", "_output_shapes") so the
    GraphDef holds only what a consumer needs."""
    for n in gd.node:
        for k in [k for k in n.attr if k.startswith("_")]:
            del n.attr[k]
    return gd


def make_case(out_dir, name, build, run=True):
    """`build()` runs inside a fresh graph and returns (feeds, fetches,
    targets): feeds a dict placeholder -> numpy value, fetches a list of
    tensors, targets a list of operations."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(1234)
        feeds, fetches, targets = build()
    gd = clean_graph_def(g.as_graph_def())
    used = {n.op for n in gd.node}
    missing = used - STRATA_OPS
    if missing:
        sys.exit(f"case {name}: ops Strata lacks: {sorted(missing)}")
    with open(os.path.join(out_dir, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    print(f"{name}: {len(gd.node)} nodes, ops {sorted(used)}")
    if not run:
        return
    with tf1.Session(graph=g) as sess:
        values = sess.run(fetches + targets, feed_dict=feeds)[: len(fetches)]
    box = graph_pb2.GraphDef()
    for ph, value in feeds.items():
        n = box.node.add(name=strata_name(ph), op="feed")
        n.attr["value"].CopyFrom(attr_value_pb2.AttrValue(
            tensor=tf.make_tensor_proto(np.asarray(value, dtype=ph.dtype.as_numpy_dtype))))
    for t, value in zip(fetches, values):
        n = box.node.add(name=strata_name(t), op="fetch")
        n.attr["value"].CopyFrom(attr_value_pb2.AttrValue(
            tensor=tf.make_tensor_proto(np.asarray(value))))
    for op in targets:
        box.node.add(name=op.name, op="target")
    with open(os.path.join(out_dir, name + ".expected.pb"), "wb") as f:
        f.write(box.SerializeToString(deterministic=True))


def rng(seed):
    return np.random.default_rng(seed)


def mlp():
    """64-32-10 MLP with fixed weights as Const nodes, softmax output."""
    r = rng(1)
    x = tf1.placeholder(tf.float32, [None, 64], name="x")
    w1 = tf.constant(r.normal(0, 0.2, (64, 32)).astype(np.float32), name="w1")
    b1 = tf.constant(r.normal(0, 0.1, (32,)).astype(np.float32), name="b1")
    w2 = tf.constant(r.normal(0, 0.2, (32, 10)).astype(np.float32), name="w2")
    b2 = tf.constant(r.normal(0, 0.1, (10,)).astype(np.float32), name="b2")
    h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1, name="dense1"), b1, name="bias1"), name="relu1")
    logits = tf.nn.bias_add(tf.matmul(h, w2, name="dense2"), b2, name="logits")
    probs = tf.nn.softmax(logits, name="probs")
    return {x: r.normal(0, 1, (5, 64)).astype(np.float32)}, [probs, logits], []


def math_ops():
    """Elementwise arithmetic, AddN, MatMul with transposes, reductions."""
    r = rng(2)
    x = tf1.placeholder(tf.float32, [3, 4], name="x")
    y = tf1.placeholder(tf.float32, [3, 4], name="y")
    raw = tf.raw_ops
    out = {
        "add": raw.Add(x=x, y=y, name="add"),
        "addv2": raw.AddV2(x=x, y=y, name="addv2"),
        "sub": tf.subtract(x, y, name="sub"),
        "mul": tf.multiply(x, y, name="mul"),
        "div": tf.math.truediv(x, y, name="div"),
        "neg": tf.negative(x, name="neg"),
        "square": tf.square(x, name="square"),
        "sqrt": tf.sqrt(x, name="sqrt"),
        "rsqrt": tf.math.rsqrt(x, name="rsqrt"),
        "exp": tf.exp(x, name="exp"),
        "log": tf.math.log(x, name="log"),
        "pow": tf.pow(x, y, name="pow"),
        "maximum": tf.maximum(x, y, name="maximum"),
        "minimum": tf.minimum(x, y, name="minimum"),
        "addn": tf.add_n([x, y, x], name="addn"),
        "bcast": tf.multiply(x, tf.constant([1.0, 2.0, 3.0, 4.0]), name="bcast_mul"),
        "matmul": tf.matmul(x, y, transpose_b=True, name="matmul_tb"),
        "matmul_ta": tf.matmul(x, y, transpose_a=True, name="matmul_ta"),
        "matmul_tt": tf.matmul(x, tf.transpose(y), transpose_a=True, transpose_b=True,
                               name="matmul_tt"),
        "sum": tf.reduce_sum(x, axis=1, name="sum"),
        "sum_keep": tf.reduce_sum(x, axis=[0], keepdims=True, name="sum_keep"),
        "mean": tf.reduce_mean(x, axis=[0, 1], name="mean"),
        "max": tf.reduce_max(x, axis=-1, keepdims=True, name="max"),
        "min": tf.reduce_min(y, axis=0, name="min"),
    }
    feeds = {x: r.uniform(0.5, 2.0, (3, 4)).astype(np.float32),
             y: r.uniform(0.5, 2.0, (3, 4)).astype(np.float32)}
    return feeds, list(out.values()), []


def array_ops():
    """Shape manipulation, casts, comparisons and selection."""
    r = rng(3)
    x = tf1.placeholder(tf.float32, [2, 3, 4], name="x")
    ids = tf1.placeholder(tf.int32, [5], name="ids")
    flat = tf.reshape(x, [6, 4], name="reshape")
    cond = tf.equal(tf.argmax(flat, axis=1, name="argmax"),
                    tf.constant(1, tf.int64), name="equal")
    ones = tf.raw_ops.OnesLike(x=flat, name="ones_like")
    zeros = tf.raw_ops.ZerosLike(x=flat, name="zeros_like")
    sel = tf.raw_ops.Select(condition=cond, x=ones, y=flat, name="select")
    # SelectV2 broadcasts: a [6, 1] condition picks whole rows.
    cond_col = tf.reshape(cond, [6, 1], name="cond_col")
    sel2 = tf.raw_ops.SelectV2(condition=cond_col, t=zeros, e=flat, name="select_v2")
    out = [
        flat,
        tf.transpose(x, [2, 0, 1], name="transpose"),
        tf.concat([flat, ones], axis=0, name="concat"),
        tf.concat([x, x], axis=-1, name="concat_neg_axis"),
        tf.slice(x, [0, 1, 1], [2, 2, -1], name="slice"),
        tf.stack([flat, zeros], axis=1, name="pack"),
        tf.cast(flat, tf.int32, name="cast_to_int"),
        tf.cast(ids, tf.float32, name="cast_to_float"),
        tf.fill([2, 3], 7.5, name="fill"),
        tf.raw_ops.Shape(input=x, name="shape"),
        tf.raw_ops.Shape(input=x, out_type=tf.int64, name="shape64"),
        tf.argmax(flat, axis=1, name="argmax_out"),
        tf.argmax(flat, axis=0, output_type=tf.int32, name="argmax32"),
        cond,
        sel,
        sel2,
        tf.one_hot(ids, depth=4, name="one_hot"),
        tf.one_hot(ids, depth=3, on_value=2.0, off_value=-1.0, axis=0, name="one_hot_axis0"),
        tf.identity(x, name="identity"),
    ]
    feeds = {x: r.normal(0, 1, (2, 3, 4)).astype(np.float32),
             ids: np.array([0, 3, 1, 2, -1], np.int32)}
    return feeds, out, []


def nn_ops():
    """Convolution, pooling, activations, softmax and the sparse loss."""
    r = rng(4)
    img = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="img")
    labels = tf1.placeholder(tf.int32, [2], name="labels")
    filt = tf.constant(r.normal(0, 0.3, (3, 3, 3, 4)).astype(np.float32), name="filter")
    conv_same = tf.nn.conv2d(img, filt, strides=[1, 1, 1, 1], padding="SAME", name="conv_same")
    conv_valid = tf.nn.conv2d(img, filt, strides=[1, 2, 2, 1], padding="VALID", name="conv_valid")
    bias = tf.constant(r.normal(0, 0.1, (4,)).astype(np.float32), name="bias")
    act = tf.nn.relu(tf.nn.bias_add(conv_same, bias, name="bias_add"), name="relu")
    pool = tf.nn.max_pool2d(act, ksize=2, strides=2, padding="VALID", name="pool")
    pool_same = tf.nn.max_pool2d(act, ksize=3, strides=2, padding="SAME", name="pool_same")
    flat = tf.reshape(pool, [2, 36], name="flatten")
    w = tf.constant(r.normal(0, 0.2, (36, 5)).astype(np.float32), name="w")
    logits = tf.matmul(flat, w, name="logits")
    xent = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels,
                                                          name="xent")
    loss = tf.reduce_mean(xent[0], name="loss")
    out = [conv_same, conv_valid, act, pool, pool_same, logits,
           tf.sigmoid(logits, name="sigmoid"), tf.tanh(logits, name="tanh"),
           tf.nn.softmax(logits, name="softmax"), tf.nn.log_softmax(logits, name="log_softmax"),
           xent[0], xent[1], loss]
    feeds = {img: r.normal(0, 1, (2, 6, 6, 3)).astype(np.float32),
             labels: np.array([1, 4], np.int32)}
    return feeds, out, []


def batch_norm():
    """FusedBatchNormV3 training (with moving averages, and without any),
    and inference."""
    r = rng(11)
    x = tf1.placeholder(tf.float32, [2, 4, 4, 3], name="x")

    def const(name, lo, hi):
        return tf.constant(r.uniform(lo, hi, (3,)).astype(np.float32), name=name)

    scale, offset = const("scale", 0.5, 1.5), const("offset", -1, 1)
    mean, var = const("mean", -0.5, 0.5), const("var", 0.5, 1.5)
    empty = tf.constant([], tf.float32, name="empty")
    bn = tf.raw_ops.FusedBatchNormV3
    train = bn(x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3,
               exponential_avg_factor=0.1, is_training=True, name="bn_train")
    infer = bn(x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3,
               is_training=False, name="bn_infer")
    plain = bn(x=x, scale=scale, offset=offset, mean=empty, variance=empty, is_training=True,
               name="bn_plain")
    # (TensorFlow's optimizer turns inference batch norm into arithmetic, so
    # its statistics outputs cannot be fetched there.)
    out = [train.y, train.batch_mean, train.batch_variance, infer.y, plain.y, plain.batch_mean,
           plain.batch_variance]
    return {x: r.normal(0, 2, (2, 4, 4, 3)).astype(np.float32)}, out, []


def control_deps():
    """NoOp as a target, control inputs, and a fetch ordered after them."""
    x = tf1.placeholder(tf.float32, [2], name="x")
    a = tf.identity(x, name="a")
    with tf.control_dependencies([a]):
        b = tf.square(x, name="b")
        done = tf.no_op(name="done")
    with tf.control_dependencies([done]):
        c = tf.add(b, 1.0, name="c")
    return {x: np.array([1.5, -2.0], np.float32)}, [c, b], [done]


def random_ops():
    """A RandomUniform node: imported only (Strata's generator differs)."""
    shape = tf.constant([3, 2], name="shape")
    u = tf.random.uniform(shape, seed=7, name="uniform")
    tf.identity(u * 2.0, name="scaled")
    return {}, [], []


def freeze_keras(model, spec, seed):
    """`model`'s inference graph with its variables frozen to Consts (run
    eagerly, before graph mode): (GraphDef, input name, output names).
    Weights are set from `seed` (moving variances positive) so that no layer
    is at its trivial initial values."""
    r = rng(seed)
    for w in model.weights:
        shape = tuple(w.shape)
        if "variance" in w.path:
            w.assign(r.uniform(0.5, 1.5, shape).astype(w.dtype))
        else:
            w.assign(r.normal(0, 0.5, shape).astype(w.dtype))
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(fn)
    return (frozen.graph.as_graph_def(), frozen.inputs[0].name,
            [t.name for t in frozen.outputs])


def keras_models():
    """The Keras test models, frozen (eager mode)."""
    import keras
    L = keras.layers
    keras.utils.set_random_seed(5)
    # A CNN: Conv2D with GELU, BatchNormalization, average and max pooling,
    # Flatten, Dropout, a softmax Dense.
    cnn = keras.Sequential([
        keras.Input((8, 8, 3)),
        L.Conv2D(6, 3, padding="same", activation="gelu"),
        L.BatchNormalization(),
        L.AveragePooling2D(2),
        L.Conv2D(4, 2, activation="relu"),
        L.MaxPooling2D(2, padding="same"),
        L.Flatten(),
        L.Dropout(0.3),
        L.Dense(5, activation="softmax"),
    ])
    # Embedding + GlobalAveragePooling1D + Dense(tanh) over int32 token ids.
    emb = keras.Sequential([
        keras.Input((10,), dtype="int32"),
        L.Embedding(50, 8),
        L.GlobalAveragePooling1D(),
        L.Dense(4, activation="tanh"),
    ])
    # Causal MultiHeadAttention, a residual, LayerNormalization, a Dense with
    # tanh-approximated GELU, clipping and a max over time.
    seq = keras.Input((6, 16))
    h = L.MultiHeadAttention(num_heads=2, key_dim=4)(seq, seq, use_causal_mask=True)
    h = L.LayerNormalization()(h + seq)
    h = L.Dense(8, activation=lambda t: keras.activations.gelu(t, approximate=True))(h)
    h = L.Lambda(lambda t: keras.ops.clip(t, -0.5, 1.0))(h)
    mha = keras.Model(seq, L.GlobalMaxPooling1D()(h))
    return {
        "keras_mha": (freeze_keras(mha, tf.TensorSpec([None, 6, 16], tf.float32), 9),
                      rng(10).normal(0, 1, (3, 6, 16)).astype(np.float32)),
        "keras_cnn": (freeze_keras(cnn, tf.TensorSpec([None, 8, 8, 3], tf.float32), 5),
                      rng(6).normal(0, 1, (3, 8, 8, 3)).astype(np.float32)),
        "keras_embedding": (freeze_keras(emb, tf.TensorSpec([None, 10], tf.int32), 7),
                            rng(8).integers(0, 50, (4, 10)).astype(np.int32)),
    }


KERAS = {}  # filled by main() before graph mode


def keras_case(name):
    def build():
        (gd, x_name, out_names), x_value = KERAS[name]
        tf.graph_util.import_graph_def(gd, name="")
        g = tf1.get_default_graph()
        return ({g.get_tensor_by_name(x_name): x_value},
                [g.get_tensor_by_name(n) for n in out_names], [])
    return build


CASES = [
    ("mlp", mlp, True),
    ("math_ops", math_ops, True),
    ("array_ops", array_ops, True),
    ("nn_ops", nn_ops, True),
    ("control_deps", control_deps, True),
    ("batch_norm", batch_norm, True),
    ("random_ops", random_ops, False),
    ("keras_cnn", keras_case("keras_cnn"), True),
    ("keras_embedding", keras_case("keras_embedding"), True),
    ("keras_mha", keras_case("keras_mha"), True),
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "tests", "testdata", "tf_interop")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=default_out)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    KERAS.update(keras_models())
    tf1.disable_eager_execution()
    for name, build, run in CASES:
        make_case(args.out, name, build, run)


if __name__ == "__main__":
    main()
