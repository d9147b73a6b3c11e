#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) peer of Strata's multi-worker trainer.

Trains the MLP of tools/bench/torch_train.py (Dense+ReLU hidden layers, a
Dense logits layer, Glorot-uniform kernels, zero biases, mean softmax
cross-entropy, SGD) on the same kind of synthetic data (features N(0, 1),
label = argmax of a fixed random linear map), with a global batch split
evenly over --workers processes: every process holds the same data and the
same shuffled order, and takes its slice of each global batch, so no two
workers see the same example in a step. The step: forward, backward (DDP
all-reduces the gradients in its default 25 MiB buckets over gloo on
127.0.0.1), SGD update, the loss read back as a Python float. Throughput is
global batch x timed steps / the slowest worker's wall time over them.

--workers=1 trains the same loop in one process without DDP (the single
process baseline, e.g. 1 process x 2 threads). Prints one line:

  RESULT impl=ddp-gloo workers=2 examples_per_s=17000      (or impl=torch-1proc)

Run with Debian's interpreter and OpenBLAS-openmp (see peers_common.torch_env):

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp GLOO_SOCKET_IFNAME=lo \\
    /usr/bin/python3 tools/bench/ddp_train.py --workers=2 --threads=1
"""
import argparse
import os
import sys
import tempfile
import time

import peers_common as pc


def train(a, rank):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    distributed = a.workers > 1
    if distributed:
        dist.init_process_group("gloo", init_method=f"file://{a.store}", rank=rank,
                                world_size=a.workers)
    torch.manual_seed(a.seed)  # the same data, weights and order on every worker
    x = torch.randn(a.examples, a.features)
    w = torch.randn(a.features, a.classes)
    y = torch.argmax(x @ w, dim=1)

    layers, width = [], a.features
    for h in [int(h) for h in a.hidden.split(",") if h] + [a.classes]:
        lin = torch.nn.Linear(width, h)
        torch.nn.init.xavier_uniform_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
        layers += [lin, torch.nn.ReLU()]
        width = h
    model = torch.nn.Sequential(*layers[:-1])  # no ReLU on the logits
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate)

    steps_per_epoch = a.examples // a.batch
    perm, pos = torch.randperm(a.examples), 0
    t0, loss_value = None, 0.0
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            if distributed:
                dist.barrier()
            t0 = time.perf_counter()
        if pos == steps_per_epoch:
            perm, pos = torch.randperm(a.examples), 0
        idx = perm[pos * a.batch:(pos + 1) * a.batch][rank::a.workers]
        pos += 1
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        loss_value = loss.item()
    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    if distributed:
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        dist.destroy_process_group()
    if rank == 0:
        impl = "ddp-gloo" if distributed else "torch-1proc"
        print(pc.train_result(impl, a.workers, a.steps * a.batch / elapsed.item()), flush=True)
        print(f"final loss {loss_value:.4f}, {a.threads} thread(s) per worker, torch {torch.__version__}",
              file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=2, help="processes; 1: no DDP")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--rank", type=int, default=-1, help="this worker (internal); -1: start them all")
    p.add_argument("--store", default="", help="rendezvous file (internal, with --rank)")
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--examples", type=int, default=16384)
    p.add_argument("--batch", type=int, default=256, help="global batch")
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--steps", type=int, default=300, help="timed steps")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=600, help="seconds, when starting the workers")
    a = p.parse_args()
    if a.workers < 1 or a.batch % a.workers != 0:
        sys.exit(f"ddp_train: --batch={a.batch} does not split over --workers={a.workers}")
    if a.workers == 1 or a.rank >= 0:
        train(a, max(a.rank, 0))
        return
    with tempfile.TemporaryDirectory() as tmp:
        passthrough = [arg for arg in sys.argv[1:] if not arg.startswith(("--rank", "--store"))]
        cmds = [[pc.TORCH_PYTHON, os.path.abspath(__file__)] + passthrough
                + [f"--rank={r}", f"--store={os.path.join(tmp, 'store')}"] for r in range(a.workers)]
        try:
            out = pc.run_ranks(cmds, env=pc.torch_env(a.threads), timeout=a.timeout)[0]
        except RuntimeError as e:
            sys.exit(f"ddp_train: {e}")
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
