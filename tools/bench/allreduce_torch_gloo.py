#!/usr/bin/python3
"""PyTorch gloo peer of Strata's cross-process all-reduce benchmark.

torch.distributed.all_reduce (gloo backend, float32 SUM, in place) between N
local processes, rendezvous through a file, traffic on 127.0.0.1
(GLOO_SOCKET_IFNAME=lo). Sizes, iterations and timing follow
peers_common's schedule (the flags of allreduce_mpi.c): warm-up, barrier,
timed loop, the slowest rank's mean. Rank 0 prints one line per size:

  RESULT impl=torch-gloo ranks=2 bytes=4096 time_us=550.0 busbw_gbps=0.007

Run it with Debian's interpreter; without --rank it starts the N ranks
itself:

  /usr/bin/python3 tools/bench/allreduce_torch_gloo.py --ranks=2 [--budget_bytes=...]
"""
import argparse
import os
import sys
import tempfile
import time

import peers_common as pc


def run_rank(a, schedule):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{a.store}", rank=a.rank,
                            world_size=a.ranks)
    n = a.ranks
    expected = n * (n + 1) / 2
    for nbytes in pc.sizes(schedule):
        count = nbytes // 4
        warmup, iters = pc.iterations(schedule, nbytes)
        # all_reduce is in place: refill before the checked operation. The values
        # then grow by n each step; they reach inf, never denormals, so the
        # arithmetic costs the same.
        t = torch.full((count,), float(a.rank + 1), dtype=torch.float32)
        dist.all_reduce(t)
        if t[0].item() != expected or t[-1].item() != expected:
            sys.exit(f"allreduce_torch_gloo: rank {a.rank} got {t[0].item()}, want {expected} "
                     f"at {nbytes} bytes")
        for _ in range(warmup - 1):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)
        if a.rank == 0:
            print(pc.allreduce_result(a.impl, n, nbytes, mean.item()), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rank", type=int, default=-1, help="this process's rank; -1: start all ranks")
    p.add_argument("--store", default="", help="rendezvous file (with --rank)")
    p.add_argument("--impl", default="torch-gloo")
    p.add_argument("--timeout", type=int, default=600, help="seconds, when starting the ranks")
    pc.add_schedule_flags(p)
    a = p.parse_args()
    schedule = {k: getattr(a, k) for k in pc.FULL_SCHEDULE}
    why = pc.check_schedule(schedule)
    if why:
        sys.exit(f"allreduce_torch_gloo: {why}")
    if a.rank >= 0:
        if not a.store or a.rank >= a.ranks:
            sys.exit("allreduce_torch_gloo: --rank needs --store and 0 <= rank < --ranks")
        run_rank(a, schedule)
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        cmds = [[pc.TORCH_PYTHON, os.path.abspath(__file__), f"--ranks={a.ranks}", f"--rank={r}",
                 f"--store={store}", f"--impl={a.impl}"] + pc.schedule_flags(schedule)
                for r in range(a.ranks)]
        try:
            out = pc.run_ranks(cmds, env=pc.torch_env(1), timeout=a.timeout)[0]
        except RuntimeError as e:
            sys.exit(f"allreduce_torch_gloo: {e}")
    sys.stdout.write(out)


if __name__ == "__main__":
    main()
