#!/usr/bin/env bash
# The prepared GPU check's bundle (tools/gpu_bundle.sh over
# //tools:gpu_check_binaries), made and run on a machine without a GPU:
#   - it holds a wrapper for every binary, the runner and the step benchmark,
#     and fits what a GPU run may carry beside the working tree (56 of 64 MiB);
#   - run under an empty environment from another directory it starts, finds
#     no GPU, and says so: exit 2, a JSON report with status "no_gpu" and the
#     CUDA runtime's reason, the same in the readable report, and nothing but
#     the three report files in the results folder;
#   - a results folder that cannot be made is an error, not a crash.
# Args: gpu_bundle.sh, then the binaries.
set -euo pipefail
bundler=$(realpath "$1")
shift
bins=()
for b in "$@"; do bins+=("$(realpath "$b")"); done
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/gpu_check
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bundler" "$out" "${bins[@]}" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "bundling failed"; }
cat "$tmp/log"
for f in run.sh bundle.tar.xz MANIFEST; do
  [[ -f $out/$f ]] || fail "$f missing from $out"
done
for b in "${bins[@]}"; do
  name=$(basename "$b")
  grep -q " ./$name\$" "$out/MANIFEST" && grep -q " ./bin/$name\$" "$out/MANIFEST" ||
    fail "no wrapper or binary for $name in the bundle"
done
for f in run.py gpu_step_bench.py; do
  grep -q " ./$f\$" "$out/MANIFEST" || fail "$f missing from the bundle"
done
size=$(du -sb "$out" | awk '{print $1}')
(( size <= 56 * 1024 * 1024 )) || fail "the bundle is $size bytes, over 56 MiB"
echo "bundle: $((size / 1024 / 1024)) MiB packed"

report=$tmp/report
cd /
set +e
env -i "$out/run.sh" "$report" >"$tmp/run.log" 2>&1
rc=$?
set -e
cat "$tmp/run.log"
(( rc == 2 )) || fail "expected exit 2 (no GPU), got $rc"
grep -q "no GPU" "$tmp/run.log" || fail "the run did not say 'no GPU'"
got=$(cd "$report" && ls -A | sort | tr '\n' ' ')
[[ $got == "gpu_check.json gpu_check.log gpu_check.txt " ]] || fail "results folder holds: $got"
/usr/bin/env python3 - "$report/gpu_check.json" <<'PY' || fail "bad JSON report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "no_gpu", r["status"]
step = r["steps"][-1]
assert step["name"] == "list_devices" and step["status"] == "no_gpu", step
assert "cudaGetDeviceCount" in step["summary"], step["summary"]
assert any(d["type"] == "CPU" for d in step["devices"]), step["devices"]
PY
head -n 1 "$report/gpu_check.txt" | grep -q "NO_GPU" || fail "readable report: $(head -n 1 "$report/gpu_check.txt")"
grep -q "no GPU: cudaGetDeviceCount said" "$report/gpu_check.txt" || fail "the readable report gives no reason"

# A results folder that cannot be made.
touch "$tmp/file"
set +e
env -i "$out/run.sh" "$tmp/file/sub" >"$tmp/bad.log" 2>&1
rc=$?
set -e
(( rc != 0 )) || fail "an unusable results folder should be an error"
grep -q "Traceback" "$tmp/bad.log" && fail "a traceback instead of an error: $(cat "$tmp/bad.log")"
echo PASS
