#!/usr/bin/env python3
"""Runs Strata's whole GPU path on a GPU machine and writes one report.

This is the part of tools/gpu_check.sh that runs THERE: the bundle that
gpu_check.sh makes holds it as run.py beside the bundled binaries, and its
run.sh starts it:

    gpu_check/run.sh "$OUT"        # on the GPU machine (python3 with PyTorch)

Every step runs under a timeout inside one overall budget (--budget_s, 400 s
by default, inside the 7 minutes a lent machine's check may take); a step that
does not fit is reported as not run, never as passed. The report is
REPORT_DIR/gpu_check.json (every figure, every step's status) and
REPORT_DIR/gpu_check.txt (the same, readable); REPORT_DIR/gpu_check.log holds
every step's command and full output; REPORT_DIR/gpu_step_trace.json (when
the step benchmark ran) is a Chrome trace of five Strata steps, every kernel
with its host-side start and end, and REPORT_DIR/gpu_step_trace_synced.json
five more with the GPU waited for after each kernel (so each event includes
the kernel's time on the GPU). Nothing else is written there, so the
files come back from a lent machine (at most 8 may).

Steps, in order:
  1. list_devices --json: with no GPU the report says "no GPU" and why (the
     CUDA runtime's answer), and nothing else runs (exit 2);
  2. the GPU test binaries (gtest, one JSON result each): the CUDA smoke test,
     the GPU device, every GPU kernel against its CPU kernel (the oracle),
     NCCL's communicator and collective executor with one rank, and the
     trainer on the GPU against the CPU (MLP, CNN, MirroredStrategy through
     NCCL);
  3. the bundled trainer binary on /cpu:0 and /gpu:0 from one seed (MLP, CNN)
     and mirrored over every GPU: test accuracies side by side, the GPU's
     within 1 point of the CPU's;
  4. gpu_step_bench.py: one 784-512-512-10 MLP step against PyTorch eager and
     torch.compile, and cuBLAS MatMul TFLOP/s (4096^3 float32 and bfloat16
     among them) against torch.matmul.

Exit status: 0 every step passed, 1 a step failed or did not fit the budget,
2 no GPU (the report says why).
"""
import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The gtest binaries of step 2, in the order they run (cheap and basic first,
# so that a broken device shows up before the long tests), with a timeout each.
GTESTS = [
    ("smoke_test", 60),
    ("gpu_device_test", 90),
    ("gpu_kernels_oracle_test", 150),
    ("nccl_communicator_gpu_test", 60),
    ("nccl_collective_executor_gpu_test", 90),
    ("recorded_step_gpu_test", 120),
    ("trainer_gpu_test", 180),
]

# Step 3: the trainer binary, CPU against GPU from one seed.
TRAINER_RUNS = [
    # (name, model, extra flags)
    ("mlp", "mlp", ["--hidden=64", "--steps=300"]),
    ("cnn", "cnn", ["--steps=150"]),
]
TRAINER_COMMON = ["--optimizer=sgd", "--learning_rate=0.05", "--global_batch_size=32",
                  "--seed=7", "--quiet", "--prefetch=0"]


class Report:
    def __init__(self, out_dir, budget_s):
        self.out_dir = out_dir
        # Everything but the three report files (gtest results, metrics,
        # checkpoints) goes here, not to the results folder.
        self.scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                    f"strata_gpu_check_{os.getpid()}")
        os.makedirs(self.scratch, exist_ok=True)
        self.deadline = time.monotonic() + budget_s
        self.started = time.time()
        self.steps = []
        self.data = {"tool": "tools/gpu_check.sh", "started_utc":
                     time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
                     "host": platform.node(), "budget_s": budget_s, "steps": self.steps}
        self.log = open(os.path.join(out_dir, "gpu_check.log"), "w")

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, cmd, timeout, env=None, cwd=None):
        """Runs cmd under min(timeout, budget left); returns (rc, output, seconds).
        rc is None when it ran out of time or could not start."""
        limit = min(timeout, self.left())
        self.log.write(f"\n$ {' '.join(shlex.quote(c) for c in cmd)}   (limit {limit:.0f} s)\n")
        self.log.flush()
        if limit < 5:
            self.log.write("not run: the budget is spent\n")
            return None, "not run: the check's time budget is spent", 0.0
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", timeout=limit, env=env, cwd=cwd)
            out, rc = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode(
                "utf-8", "replace")
            out += f"\n[timed out after {limit:.0f} s]"
            rc = None
        except OSError as e:
            out, rc = f"could not start: {e}", None
        secs = time.monotonic() - t0
        self.log.write(out)
        self.log.write(f"\n[exit {rc}, {secs:.1f} s]\n")
        self.log.flush()
        return rc, out, secs

    def step(self, name, status, seconds=0.0, summary="", **details):
        entry = {"name": name, "status": status, "seconds": round(seconds, 2), "summary": summary}
        entry.update(details)
        self.steps.append(entry)
        print(f"[{status:>7}] {name}: {summary}", flush=True)
        return entry

    def write(self, overall):
        self.data["status"] = overall
        self.data["seconds"] = round(time.time() - self.started, 1)
        with open(os.path.join(self.out_dir, "gpu_check.json"), "w") as f:
            json.dump(self.data, f, indent=1)
        with open(os.path.join(self.out_dir, "gpu_check.txt"), "w") as f:
            f.write(render_text(self.data))
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def render_text(d):
    lines = [f"Strata GPU check, {d['started_utc']} on {d.get('host', '?')}: {d['status'].upper()} "
             f"({d['seconds']} s of a {d['budget_s']} s budget)"]
    env = d.get("environment", {})
    for k in ("gpu", "driver", "torch", "python"):
        if env.get(k):
            lines.append(f"  {k}: {env[k]}")
    lines.append("")
    for s in d["steps"]:
        lines.append(f"[{s['status']}] {s['name']} ({s['seconds']} s): {s['summary']}")
        for case in s.get("failed_cases", []):
            lines.append(f"    FAILED {case['name']}: {case['message'][:400]}")
        for case in s.get("skipped_cases", []):
            lines.append(f"    skipped {case['name']}")
        for row in s.get("rows", []):
            lines.append("    " + row)
    return "\n".join(lines) + "\n"


def bundled(name):
    return os.path.join(HERE, name)


def environment(report):
    env = {"python": sys.version.split()[0]}
    rc, out, _ = report.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                             "--format=csv,noheader"], 20)
    if rc == 0 and out.strip():
        first = out.strip().splitlines()[0]
        parts = [p.strip() for p in first.split(",")]
        env["gpu"] = parts[0]
        if len(parts) > 1:
            env["driver"] = parts[1]
        if len(parts) > 2:
            env["gpu_memory"] = parts[2]
    rc, out, _ = report.run([sys.executable, "-c",
                             "import torch; print(torch.__version__, torch.version.cuda, "
                             "torch.cuda.is_available())"], 60)
    if rc == 0 and out.strip():
        env["torch"] = out.strip().splitlines()[-1]
    report.data["environment"] = env


def list_devices(report):
    """Step 1. Returns the number of GPUs Strata sees (0: none)."""
    rc, out, secs = report.run([bundled("list_devices"), "--json"], 30)
    if rc != 0:
        report.step("list_devices", "failed", secs, f"exit {rc}: {out.strip()[-500:]}")
        return -1
    try:
        listing = json.loads(out[out.index("{"):])
    except ValueError:
        report.step("list_devices", "failed", secs, f"printed no JSON: {out.strip()[-500:]}")
        return -1
    gpus = [d for d in listing.get("devices", []) if d.get("type") == "GPU"]
    rows = [f"{d.get('name')}: {d.get('details', '')}" for d in listing.get("devices", [])]
    if not gpus:
        note = listing.get("note") or "no GPU listed"
        report.step("list_devices", "no_gpu", secs, note, devices=listing.get("devices", []),
                    rows=rows)
        return 0
    report.step("list_devices", "passed", secs, f"{len(gpus)} GPU(s)",
                devices=listing.get("devices", []), rows=rows)
    return len(gpus)


def gtest(report, name, timeout):
    """Step 2: one gtest binary, its JSON result parsed."""
    result = os.path.join(report.scratch, f"{name}.json")
    if os.path.exists(result):
        os.remove(result)
    env = dict(os.environ)
    env.setdefault("TEST_TMPDIR", os.path.join(report.scratch, name))
    os.makedirs(env["TEST_TMPDIR"], exist_ok=True)
    rc, out, secs = report.run([bundled(name), f"--gtest_output=json:{result}"], timeout, env=env)
    cases, failed, skipped = 0, [], []
    if os.path.exists(result):
        try:
            with open(result) as f:
                parsed = json.load(f)
        except ValueError:
            parsed = {}
        for suite in parsed.get("testsuites", []):
            for t in suite.get("testsuite", []):
                cases += 1
                full = f"{suite.get('name')}.{t.get('name')}"
                if t.get("failures"):
                    failed.append({"name": full, "message": "\n".join(
                        x.get("failure", "") for x in t["failures"])})
                elif t.get("result") == "SKIPPED":
                    skipped.append({"name": full})
    # gtest's JSON has no skip messages: the line after "file:N: Skipped" is one.
    lines = out.splitlines()
    skip_why = sorted({lines[i + 1].strip() for i, l in enumerate(lines[:-1])
                       if l.endswith(": Skipped")})
    # Lines the tests print for people (accuracies, bandwidths) go into the report.
    notes = [l.strip() for l in lines if l and not l.startswith(("[", "Note:", "Running main()"))
             and not l.endswith(": Skipped") and l.strip() not in skip_why and len(l) < 300][:20]
    if rc is None:
        status, summary = "failed", out.strip().splitlines()[-1] if out.strip() else "did not run"
    elif failed:
        status, summary = "failed", f"{len(failed)} of {cases} cases failed (exit {rc})"
    elif rc != 0:
        # A crash (or an exit) that no case reported: its last words.
        status = "failed"
        summary = f"exit {rc} with {cases} cases reported: {out.strip()[-400:]}"
    elif skipped:
        # Every skip in these tests means "no GPU", yet list_devices saw one.
        status = "failed"
        summary = (f"{len(skipped)} of {cases} cases skipped although list_devices saw a GPU: "
                   + "; ".join(skip_why)[:400])
    else:
        status, summary = "passed", f"{cases} of {cases} cases passed"
    report.step(name, status, secs, summary, cases=cases, failed_cases=failed,
                skipped_cases=skipped, rows=notes)


def final_metrics(path):
    """The trainer's final JSON line (--metrics_out)."""
    final = None
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{") and '"final":true' in line.replace(" ", ""):
                    final = json.loads(line)
    except (OSError, ValueError):
        return None
    return final


def trainer(report, name, model, extra, n_gpus):
    """Step 3: the trainer binary on the CPU and on the GPU, accuracies compared."""
    accs, secs_total, rows = {}, 0.0, []
    runs = [("cpu", ["--devices=/cpu:0"]), ("gpu", ["--devices=/gpu:0"])]
    if name == "mlp":
        # Mirrored over every GPU: NCCL (one rank on a one-GPU machine).
        runs.append(("mirrored_gpu", ["--strategy=mirrored",
                                      f"--global_batch_size={32 * n_gpus}"]))
        # Mixed precision: bfloat16 layers, float32 variables (train/policy.h).
        runs.append(("gpu_mixed_bfloat16", ["--devices=/gpu:0", "--dtype_policy=mixed_bfloat16"]))
    for where, flags in runs:
        metrics = os.path.join(report.scratch, f"trainer_{name}_{where}.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        # Later flags win (absl), so the mirrored run's batch replaces the common one.
        cmd = [bundled("trainer"), f"--model={model}", *TRAINER_COMMON, *extra, *flags,
               f"--metrics_out={metrics}"]
        rc, out, secs = report.run(cmd, 120)
        secs_total += secs
        final = final_metrics(metrics) if rc == 0 else None
        if final is None or final.get("test_accuracy") is None:
            report.step(f"trainer_{name}", "failed", secs_total,
                        f"{where}: exit {rc}: {out.strip()[-400:]}", rows=rows)
            return
        accs[where] = final["test_accuracy"]
        rows.append(f"{where}: test accuracy {final['test_accuracy']:.4f}, "
                    f"loss {final.get('test_loss', float('nan')):.4f}, {secs:.1f} s")
    worst = max(abs(accs[w] - accs["cpu"]) for w in accs if w != "cpu")
    ok = worst <= 0.01
    report.step(f"trainer_{name}", "passed" if ok else "failed", secs_total,
                f"GPU accuracy within {worst * 100:.2f} points of the CPU's (bar: 1 point)",
                accuracy=accs, rows=rows)


def step_bench(report):
    """Step 4: gpu_step_bench.py (MLP step vs PyTorch; MatMul TFLOP/s)."""
    out_json = os.path.join(report.scratch, "gpu_step.json")
    cmd = [sys.executable, bundled("gpu_step_bench.py"),
           f"--strata_bench={bundled('gpu_step_bench')}",
           f"--kernels_bench={bundled('gpu_kernels_bench')}", "--compile",
           f"--json_out={out_json}",
           f"--strata_trace={os.path.join(report.out_dir, 'gpu_step_trace.json')}",
           f"--strata_trace_synced={os.path.join(report.out_dir, 'gpu_step_trace_synced.json')}"]
    rc, out, secs = report.run(cmd, 240)
    if rc != 0 or not os.path.exists(out_json):
        report.step("gpu_step_bench", "failed", secs, f"exit {rc}: {out.strip()[-600:]}")
        return
    with open(out_json) as f:
        res = json.load(f)
    rows = [l for l in out.splitlines() if l.strip()][:44]
    ratio = res.get("ratio_median")
    compiled = res.get("torch_compile", {})
    summary = f"Strata / PyTorch eager step {ratio:.3f}x (bar <= 0.5x)"
    if compiled.get("step_ms_median"):
        summary += (f", / torch.compile {res['strata']['step_ms_median'] / compiled['step_ms_median']:.3f}x"
                    " (bar <= 1.0x)")
    elif compiled.get("error"):
        summary += f", torch.compile failed ({compiled['error'][:200]})"
    st, un = res.get("strata", {}), res.get("strata_unrecorded", {})
    if un.get("step_ms_median"):
        summary += (f"; CUDA graphs recorded {st.get('recorded', 0)}, replayed {st.get('replayed', 0)}, "
                    f"step {st['step_ms_median'] / un['step_ms_median']:.3f}x of kernel by kernel")
        if st.get("not_recorded"):
            summary += f" (not recorded: {st['not_recorded'][:200]})"
    mixed, ref_mixed = res.get("strata_mixed_bfloat16", {}), res.get("torch_autocast_bfloat16", {})
    if mixed.get("step_ms_median") and ref_mixed.get("step_ms_median"):
        summary += (f"; mixed_bfloat16 step {mixed['step_ms_median']:.3f} ms, "
                    f"{mixed['step_ms_median'] / ref_mixed['step_ms_median']:.3f}x PyTorch autocast")
    big = [r for r in res.get("matmul", []) if r["m"] == r["k"] == r["n"] == 4096]
    for r in big:
        summary += f"; MatMul 4096^3 {r['dtype']} {r['strata_tflops']:.0f} TFLOP/s " \
                   f"({r['strata_tflops'] / r['torch_tflops']:.2f}x torch)"
    report.step("gpu_step_bench", "passed", secs, summary, result=res, rows=rows)


def lm_bench(report):
    """Step 5: the transformer LM's training tokens/s on the GPU against the same model in PyTorch eager."""
    model = ["--batch=16", "--seq=64", "--width=128", "--heads=4", "--blocks=2", "--vocab=96", "--steps=20",
             "--warmup=3", "--rounds=3", "--json"]
    runs, rows, secs_total = {}, [], 0.0
    for name, cmd in (("strata", [bundled("lm_bench"), "--device=/gpu:0"] + model),
                      ("torch", [sys.executable, bundled("lm_torch.py"), "--device=cuda"] + model)):
        rc, out, secs = report.run(cmd, 180)
        secs_total += secs
        lines = [l for l in out.splitlines() if l.startswith("{")]
        if rc != 0 or not lines:
            report.step("lm_bench", "failed", secs_total, f"{name}: exit {rc}: {out.strip()[-500:]}", rows=rows)
            return
        runs[name] = json.loads(lines[-1])
        rows.append(f"{name}: {runs[name]['tokens_per_sec']:.0f} tokens/s, loss {runs[name]['loss_first']:.4f} -> "
                    f"{runs[name]['loss_last']:.4f}")
    ratio = runs["strata"]["tokens_per_sec"] / runs["torch"]["tokens_per_sec"]
    report.step("lm_bench", "passed", secs_total,
                f"transformer LM training {runs['strata']['tokens_per_sec']:.0f} tokens/s, {ratio:.2f}x PyTorch eager "
                f"(issue 20's target >= 1.0x: {'met' if ratio >= 1.0 else 'NOT met'})", result=runs, rows=rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("report_dir", nargs="?", default=os.environ.get("OUT") or "gpu_check_results")
    p.add_argument("--budget_s", type=float, default=400)
    p.add_argument("--only", default="", help="comma-separated step names (list_devices always runs)")
    args = p.parse_args()
    os.makedirs(args.report_dir, exist_ok=True)
    report = Report(args.report_dir, args.budget_s)
    only = set(filter(None, args.only.split(",")))
    want = lambda name: not only or name in only

    environment(report)
    n_gpus = list_devices(report)
    if n_gpus == 0:
        report.write("no_gpu")
        print(f"{report.steps[-1]['summary']}; report in {args.report_dir}/gpu_check.txt")
        return 2
    if n_gpus > 0:
        for name, timeout in GTESTS:
            if want(name):
                gtest(report, name, timeout)
        for name, model, extra in TRAINER_RUNS:
            if want(f"trainer_{name}"):
                trainer(report, name, model, extra, n_gpus)
        if want("gpu_step_bench"):
            step_bench(report)
        if want("lm_bench"):
            lm_bench(report)
    ok = all(s["status"] == "passed" for s in report.steps)
    report.write("passed" if ok else "failed")
    print(f"report in {args.report_dir}/gpu_check.txt and gpu_check.json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
