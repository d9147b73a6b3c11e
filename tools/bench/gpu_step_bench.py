#!/usr/bin/env python3
"""One MLP training step in Strata and in PyTorch eager on the same GPU.

Runs, side by side in one run on one GPU:

  1. one training step of the 784-512-512-10 MLP at batch 256 (forward,
     sparse softmax cross-entropy, backward, SGD), the batch resident on the
     GPU: Strata's `gpu_step_bench` (tools/bench/gpu_step_bench.cc, one
     Session::Run of the train op per step, which returns once the step has
     finished on the GPU) against the same step in PyTorch eager, timed the
     same way (torch.cuda.synchronize() after each step) and also pipelined
     (N steps, one synchronize: what an eager loop that never reads the loss
     gets), and with --compile under torch.compile(mode="reduce-overhead").
     The ratio Strata / PyTorch uses the per-step synchronized time; issue
     20's targets are <= 0.5x eager and <= 1.0x torch.compile;
  2. cuBLAS MatMul TFLOP/s: Strata's MatMul kernel (`gpu_kernels_bench`,
     runtime/gpu/, on the GpuDevice sessions use) next to torch.matmul on the same shapes and dtypes (the
     MLP's forward and backward products and 4096^3), both timed with CUDA
     events around 50 back-to-back launches after a warm-up (the mean over
     repetitions), float32 without TF32.

Both use full float32 (no TF32): Strata's float MatMul computes in
CUBLAS_COMPUTE_32F; PyTorch is told allow_tf32 = False.

Where there is no GPU (or PyTorch has no CUDA) the script exits 1 saying so;
it never reports numbers it did not measure. `--device=cpu` runs part 1 on
the CPU instead (both frameworks), to check the script on any machine.

On a lent GPU machine (no Bazel there), after bundling (docs/gpu.md,
"Running on a lent GPU machine"):

  python3 gpu_step_bench.py --strata_bench=./gpu_step_bench/gpu_step_bench \\
      --kernels_bench=./gpu_kernels_bench/gpu_kernels_bench --json_out=gpu_step.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def fail(msg):
    print(f"gpu_step_bench.py: {msg}", file=sys.stderr)
    sys.exit(1)


def find(path, candidates):
    if path:
        if not os.path.exists(path):
            fail(f"{path} does not exist")
        return path
    for c in candidates:
        if os.path.exists(c):
            return c
    fail("cannot find " + " or ".join(candidates) + " (pass the path)")


def summarize(ms):
    ms = sorted(ms)
    n = len(ms)
    return {
        "step_ms_median": statistics.median(ms),
        "step_ms_mean": sum(ms) / n,
        "step_ms_p10": ms[n // 10],
        "step_ms_p90": ms[min(n - 1, n * 9 // 10)],
    }


def torch_step(torch, args, device, compile_mode=None, autocast_bf16=False):
    """The same step as gpu_step_bench.cc, in PyTorch eager, or with the
    forward and loss under torch.compile(mode=compile_mode) (backward through
    the compiled graph's AOT backward, the optimizer eager)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(1)
    sizes = [args.features] + [int(h) for h in args.hidden.split(",") if h] + [args.classes]
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = (6.0 / (fan_in + fan_out)) ** 0.5  # Glorot uniform, as train::Dense
        w = (torch.rand(fan_in, fan_out, generator=g) * 2 - 1) * limit
        # Parameters, as a model's are: torch.compile's CUDA graphs treat
        # them as static inputs (plain tensors are copied in every call).
        params.append(torch.nn.Parameter(w.to(device)))
        params.append(torch.nn.Parameter(torch.zeros(fan_out, device=device)))
    x = torch.randn(args.batch, args.features, generator=g).to(device)
    y = torch.randint(0, args.classes, (args.batch,), generator=g).to(device)
    opt = torch.optim.SGD(params, lr=args.learning_rate)

    def forward_loss():
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = F.relu(h)
        return F.cross_entropy(h, y)

    if compile_mode:
        forward_loss = torch.compile(forward_loss, mode=compile_mode)
    if autocast_bf16:
        # Automatic mixed precision: matmuls in bfloat16, parameters float32.
        plain = forward_loss

        def forward_loss():
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                return plain()

    def step():
        loss = forward_loss()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: None)
    loss_first = float(step())
    for _ in range(args.warmup - 1):
        step()
    sync()
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        if args.fetch_loss:
            float(loss)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
        if args.fetch_loss:
            float(loss)
    sync()
    pipelined = (time.perf_counter() - t0) * 1e3 / args.steps
    loss_last = float(step())
    out = {"framework": (f"torch.compile({compile_mode})" if compile_mode else "torch")
           + (" autocast bfloat16" if autocast_bf16 else ""),
           "version": torch.__version__, "device": device,
           "steps": args.steps, "loss_first": loss_first, "loss_last": loss_last,
           "step_ms_pipelined": pipelined}
    out.update(summarize(ms))
    return out


def strata_step(args, device, record=True, policy="float32"):
    cmd = [args.strata_bench, f"--device=/{'gpu' if device == 'cuda' else 'cpu'}:0", "--json",
           f"--record_steps={'true' if record else 'false'}", f"--dtype_policy={policy}",
           f"--batch={args.batch}", f"--features={args.features}", f"--hidden={args.hidden}",
           f"--classes={args.classes}", f"--learning_rate={args.learning_rate}",
           f"--warmup={args.warmup}", f"--steps={args.steps}",
           f"--fetch_loss={'true' if args.fetch_loss else 'false'}"]
    # A replayed step has no kernels of its own to trace: the traces show the
    # kernel-by-kernel run.
    if args.strata_trace and not record and policy == "float32":
        cmd.append(f"--trace_out={args.strata_trace}")
    if args.strata_trace_synced and not record and policy == "float32":
        cmd.append(f"--trace_synced_out={args.strata_trace_synced}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        fail(f"{args.strata_bench} printed no result: {r.stdout.strip()} {r.stderr.strip()}")
    return json.loads(lines[-1])


TORCH_DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16"}


def matmul_table(torch, args):
    """Strata's MatMul kernel (gpu_kernels_bench) next to torch.matmul."""
    r = subprocess.run([args.kernels_bench, "--benchmark_format=json",
                        "--benchmark_filter=BM_MatMul"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{args.kernels_bench} failed (exit {r.returncode}): {r.stderr.strip()}")
    try:
        report = json.loads(r.stdout[r.stdout.index("{"):])
    except ValueError:
        fail(f"{args.kernels_bench} measured nothing: {r.stdout.strip()} {r.stderr.strip()}")
    rows = []
    for b in report.get("benchmarks", []):
        if b.get("error_occurred"):
            fail(f"{args.kernels_bench}: {b['name']}: {b.get('error_message')}")
        parts = b["name"].split("/")
        m, k, n, ta, tb = (int(v) for v in parts[1:6])
        dtype = b.get("label", "float").split(" ")[0]
        # From the manual (CUDA event) time per iteration of 50 launches, not
        # the benchmark's rate counter (google-benchmark divides rates by CPU
        # time).
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
        manual_seconds = b["real_time"] * unit
        tdt = getattr(torch, TORCH_DTYPES[dtype])
        a = torch.zeros((k, m) if ta else (m, k), device="cuda", dtype=tdt)
        bb = torch.zeros((n, k) if tb else (k, n), device="cuda", dtype=tdt)
        aa = a.t() if ta else a
        bm = bb.t() if tb else bb
        for _ in range(5):
            torch.matmul(aa, bm)
        torch.cuda.synchronize()
        # The mean over reps of 50 launches, as google-benchmark reports
        # Strata's (both warmed up first).
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.matmul_reps):
            for _ in range(50):
                torch.matmul(aa, bm)
        stop.record()
        stop.synchronize()
        torch_seconds = start.elapsed_time(stop) / 1e3 / args.matmul_reps
        rows.append({"m": m, "k": k, "n": n, "ta": bool(ta), "tb": bool(tb), "dtype": dtype,
                     "strata_tflops": 2.0 * m * n * k * 50 / manual_seconds / 1e12,
                     "torch_tflops": 2.0 * m * n * k * 50 / torch_seconds / 1e12})
    if not rows:
        fail(f"{args.kernels_bench} reported no MatMul benchmark")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strata_bench", default="", help="gpu_step_bench (bundled wrapper or bazel-bin)")
    p.add_argument("--kernels_bench", default="", help="gpu_kernels_bench (bundled wrapper or bazel-bin)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--features", type=int, default=784)
    p.add_argument("--hidden", default="512,512")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--fetch_loss", action="store_true", help="read the loss back every step")
    p.add_argument("--matmul_reps", type=int, default=20)
    p.add_argument("--no_matmul", action="store_true", help="skip the MatMul table")
    p.add_argument("--compile", action="store_true",
                   help='also time the step with torch.compile(mode="reduce-overhead")')
    p.add_argument("--json_out", default="", help="also write every figure here")
    p.add_argument("--strata_trace", default="",
                   help="a Chrome trace of five Strata steps after the timed ones (runtime/trace.h)")
    p.add_argument("--strata_trace_synced", default="",
                   help="the same, the device waited for after each kernel (its time on the GPU)")
    args = p.parse_args()
    if args.steps < 10 or args.warmup < 1:
        fail("--steps must be >= 10 and --warmup >= 1")

    try:
        import torch
    except ImportError as e:
        fail(f"PyTorch is not importable ({e}); the comparison needs it")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            fail(f"no GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none; "
                 "this benchmark needs one (--device=cpu checks the script on the CPU)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    args.strata_bench = find(args.strata_bench, [
        os.path.join(os.getcwd(), "gpu_step_bench", "gpu_step_bench"),
        os.path.join(root, "bazel-bin", "tools", "gpu_step_bench")])
    if args.device == "cuda" and not args.no_matmul:
        args.kernels_bench = find(args.kernels_bench, [
            os.path.join(os.getcwd(), "gpu_kernels_bench", "gpu_kernels_bench"),
            os.path.join(root, "bazel-bin", "runtime", "gpu", "gpu_kernels_bench")])

    gpu_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print(f"MLP {args.features}-{args.hidden.replace(',', '-')}-{args.classes}, batch {args.batch}, "
          f"SGD, float32; {args.steps} timed steps after {args.warmup}; {gpu_name}; "
          f"torch {torch.__version__}")
    strata = strata_step(args, args.device)
    unrecorded = strata_step(args, args.device, record=False)
    ref = torch_step(torch, args, args.device)
    mixed = strata_step(args, args.device, policy="mixed_bfloat16") if args.device == "cuda" else None
    ref_mixed = torch_step(torch, args, args.device, autocast_bf16=True) if args.device == "cuda" else None
    ratio = strata["step_ms_median"] / ref["step_ms_median"]
    print()
    print(f"{'framework':<34} {'median ms':>10} {'mean ms':>10} {'p10 ms':>10} {'p90 ms':>10}")
    print(f"{'Strata (Session::Run, synced)':<34} {strata['step_ms_median']:>10.4f} "
          f"{strata['step_ms_mean']:>10.4f} {strata['step_ms_p10']:>10.4f} {strata['step_ms_p90']:>10.4f}")
    print(f"{'Strata, kernel by kernel':<34} {unrecorded['step_ms_median']:>10.4f} "
          f"{unrecorded['step_ms_mean']:>10.4f} {unrecorded['step_ms_p10']:>10.4f} "
          f"{unrecorded['step_ms_p90']:>10.4f}")
    print(f"{'PyTorch eager (synced each step)':<34} {ref['step_ms_median']:>10.4f} "
          f"{ref['step_ms_mean']:>10.4f} {ref['step_ms_p10']:>10.4f} {ref['step_ms_p90']:>10.4f}")
    print(f"{'PyTorch eager (pipelined)':<34} {ref['step_ms_pipelined']:>10.4f}")
    if mixed:
        for label, r in (("Strata mixed_bfloat16", mixed), ("PyTorch eager autocast bfloat16", ref_mixed)):
            print(f"{label:<34} {r['step_ms_median']:>10.4f} {r['step_ms_mean']:>10.4f} "
                  f"{r['step_ms_p10']:>10.4f} {r['step_ms_p90']:>10.4f}")
    result = {"device": gpu_name, "strata": strata, "strata_unrecorded": unrecorded, "torch": ref,
              "ratio_median": ratio}
    if mixed:
        result["strata_mixed_bfloat16"] = mixed
        result["torch_autocast_bfloat16"] = ref_mixed
    if args.compile:
        # torch.compile needs a working compiler toolchain (Triton); where it
        # fails the row says why instead of a figure.
        try:
            comp = torch_step(torch, args, args.device, compile_mode="reduce-overhead")
            print(f"{'torch.compile reduce-overhead':<34} {comp['step_ms_median']:>10.4f} "
                  f"{comp['step_ms_mean']:>10.4f} {comp['step_ms_p10']:>10.4f} "
                  f"{comp['step_ms_p90']:>10.4f}")
            result["torch_compile"] = comp
        except Exception as e:  # noqa: BLE001 -- any failure of the peer is reported, not fatal
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"{'torch.compile reduce-overhead':<34} failed: {reason}")
            result["torch_compile"] = {"error": reason}
    print()
    print(f"Strata / PyTorch eager (median, synced): {ratio:.3f}x "
          f"(issue 20's target <= 0.5x: {'met' if ratio <= 0.5 else 'NOT met'}); "
          f"vs pipelined: {strata['step_ms_median'] / ref['step_ms_pipelined']:.3f}x")
    if result.get("torch_compile", {}).get("step_ms_median"):
        rc = strata["step_ms_median"] / result["torch_compile"]["step_ms_median"]
        print(f"Strata / torch.compile reduce-overhead (median): {rc:.3f}x "
              f"(target <= 1.0x: {'met' if rc <= 1.0 else 'NOT met'})")
    print(f"Strata recorded {strata.get('recorded', 0)} CUDA graph(s), replayed {strata.get('replayed', 0)} "
          f"steps, ran {strata.get('eager', 0)} kernel by kernel"
          + (f"; not recorded: {strata['not_recorded']}" if strata.get("not_recorded") else "")
          + f"; recorded / kernel by kernel: "
          f"{strata['step_ms_median'] / unrecorded['step_ms_median']:.3f}x")
    if mixed:
        print(f"mixed_bfloat16: Strata {mixed['step_ms_median']:.4f} ms ({mixed.get('replayed', 0)} replayed), "
              f"{mixed['step_ms_median'] / strata['step_ms_median']:.3f}x its float32 step, "
              f"{mixed['step_ms_median'] / ref_mixed['step_ms_median']:.3f}x PyTorch autocast; loss "
              f"{mixed['loss_first']:.4f} -> {mixed['loss_last']:.4f} (PyTorch autocast "
              f"{ref_mixed['loss_first']:.4f} -> {ref_mixed['loss_last']:.4f})")
    print(f"loss: Strata {strata['loss_first']:.4f} -> {strata['loss_last']:.4f} "
          f"(kernel by kernel {unrecorded['loss_last']:.4f}), "
          f"PyTorch {ref['loss_first']:.4f} -> {ref['loss_last']:.4f}")

    if args.device == "cuda" and not args.no_matmul:
        rows = matmul_table(torch, args)
        print()
        print(f"{'MatMul [m x k] x [k x n]':<30} {'dtype':<9} {'Strata TFLOP/s':>15} "
              f"{'torch TFLOP/s':>14} {'ratio':>7}")
        for r in rows:
            shape = f"[{r['m']}x{r['k']}]x[{r['k']}x{r['n']}]" + (" ta" if r["ta"] else "") + \
                (" tb" if r["tb"] else "")
            print(f"{shape:<30} {r['dtype']:<9} {r['strata_tflops']:>15.2f} {r['torch_tflops']:>14.2f} "
                  f"{r['strata_tflops'] / r['torch_tflops']:>7.3f}")
        result["matmul"] = rows
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
