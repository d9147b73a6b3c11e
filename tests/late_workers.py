#!/usr/bin/env python3
"""Late workers (issue 23): clusters whose workers start up to --max_delay seconds
late, in random orders, all train; every worker must exit 0.

Each trial starts --workers trainer processes with tools/launch
(--start_delays drawn uniformly from [0, max_delay] per worker, so both the
order and the gaps are random; worker 0, the chief, is as likely as any to be
last), --heartbeat_timeout=2 (far shorter than the delays: the issue's defect
was a chief declaring itself lost while it waited) and --startup_timeout =
max_delay + 60. One line per trial; exit status 1 if any failed.

  python3 tests/late_workers.py --launch=bazel-bin/tools/launch \\
      --trainer=bazel-bin/tools/trainer --trials=10 --max_delay=60   # the issue's check
"""
import argparse
import random
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launch", required=True)
    p.add_argument("--trainer", required=True)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--max_delay", type=float, default=60)
    p.add_argument("--seed", type=int, default=0, help="0: a random seed (printed)")
    a = p.parse_args()
    seed = a.seed or random.SystemRandom().randrange(1, 1 << 31)
    rng = random.Random(seed)
    print(f"late_workers: seed {seed}, {a.trials} trials of {a.workers} workers, delays 0-{a.max_delay:g} s",
          flush=True)
    failed = 0
    for trial in range(1, a.trials + 1):
        delays = [round(rng.uniform(0, a.max_delay), 1) for _ in range(a.workers)]
        order = sorted(range(a.workers), key=lambda i: delays[i])
        cmd = [a.launch, f"--num_workers={a.workers}", "--start_delays=" + ",".join(f"{d:g}" for d in delays),
               "--", a.trainer, "--strategy=multi_worker_mirrored", "--data=synthetic:2048", "--hidden=16",
               "--steps=20", "--global_batch_size=48", "--optimizer=sgd", "--quiet", "--intra_op_threads=1",
               "--heartbeat_timeout=2", f"--startup_timeout={a.max_delay + 60:g}"]
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.max_delay + 300)
        took = time.monotonic() - t0
        ok = r.returncode == 0
        failed += not ok
        print(f"trial {trial}: delays {delays} (start order {order}): "
              f"{'trained' if ok else 'FAILED (exit %d)' % r.returncode} in {took:.1f} s", flush=True)
        if not ok:
            print("\n".join(r.stderr.splitlines()[-15:]), flush=True)
    print(f"late_workers: {a.trials - failed} of {a.trials} trials trained", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
