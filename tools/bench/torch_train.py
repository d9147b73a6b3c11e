#!/usr/bin/python3
"""PyTorch peer of Strata's trainer for throughput comparisons.

Trains the same MLP as `tools/trainer --model=mlp` (Dense+ReLU hidden layers,
a Dense logits layer, sparse softmax cross-entropy, Glorot-uniform kernels,
zero biases) on the same kind of synthetic data (features N(0, 1), label =
argmax of a fixed random linear map), with the same optimizer and batch, and
the same per-step work: gather a shuffled batch, forward, backward, update,
read the loss back as a Python float. Prints one JSON line:

  {"framework": "torch", "examples_per_sec": ..., "step_ms": ..., ...}

Run it with Debian's interpreter and OpenBLAS-openmp (the default reference
BLAS is ~20x slower), e.g.

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
    /usr/bin/python3 tools/bench/torch_train.py --features=784 --hidden=512,512 \
    --batch=256 --threads=1

tools/bench/train_throughput.sh runs it side by side with Strata.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--examples", type=int, default=16384)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam"], default="sgd")
    p.add_argument("--learning_rate", type=float, default=0.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    hidden = [int(h) for h in a.hidden.split(",") if h]

    # Data held in memory, as the trainer materializes its training split.
    x = torch.randn(a.examples, a.features)
    w = torch.randn(a.features, a.classes)
    y = torch.argmax(x @ w, dim=1)

    layers = []
    width = a.features
    for h in hidden + [a.classes]:
        lin = torch.nn.Linear(width, h)
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        layers += [lin, torch.nn.ReLU()]
        width = h
    model = torch.nn.Sequential(*layers[:-1])  # no ReLU on the logits

    lr = a.learning_rate or {"sgd": 0.1, "momentum": 0.01, "adam": 1e-3}[a.optimizer]
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    elif a.optimizer == "momentum":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-7)

    steps_per_epoch = a.examples // a.batch
    perm = torch.randperm(a.examples)
    pos = 0
    t_start = None
    loss_value = 0.0
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t_start = time.perf_counter()
        if pos == steps_per_epoch:
            perm = torch.randperm(a.examples)
            pos = 0
        idx = perm[pos * a.batch:(pos + 1) * a.batch]
        pos += 1
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        loss_value = loss.item()
    elapsed = time.perf_counter() - t_start
    print(json.dumps({
        "framework": "torch",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "examples_per_sec": a.steps * a.batch / elapsed,
        "step_ms": 1000.0 * elapsed / a.steps,
        "final_loss": loss_value,
    }))


if __name__ == "__main__":
    main()
