#!/usr/bin/env bash
# tools/bundle_gpu.sh on a small binary (list_devices): the bundle runs under
# an empty environment from another directory, every library it loads comes
# from the bundle, and a missing argument or binary is a clear error.
set -euo pipefail
script=$(realpath "$1")
bin=$(realpath "$2")
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/bundle
fail() { echo "FAIL: $*" >&2; exit 1; }

"$script" "$bin" "$out" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "bundling failed"; }
[[ -x $out/list_devices && -x $out/bin/list_devices ]] || fail "no wrapper or binary in $out"
ls "$out/lib" | grep -q '^libc\.so' || fail "the C library was not bundled"
ls "$out/lib" | grep -q '^libstdc++' || fail "libstdc++ was not bundled"
if ls "$out/lib" | grep -qE '^lib(cuda|cudart|cublas|nccl)'; then fail "a CUDA library was bundled"; fi

cd /
got=$(env -i "$out/list_devices" --json) || fail "the bundled binary did not run: $got"
[[ $got == *'device:CPU:0'* ]] || fail "unexpected output: $got"

# The loader lists what it would load: only bundled libraries (the vDSO has
# no path; CUDA libraries would come from outside, by design).
trace=$(env -i STRATA_BUNDLE_LIST=1 "$out/list_devices") || fail "trace failed: $trace"
while read -r line; do
  [[ $line == *linux-vdso* || -z $line ]] && continue
  [[ $line == *libcuda* || $line == *libcudart* ]] && continue
  if [[ $line == *"=>"* ]]; then
    path=$(awk -F'=> ' '{ split($2, a, " "); print a[1] }' <<<"$line")
  else
    path=$(awk '{ print $1 }' <<<"$line")
  fi
  [[ $path == "$out/lib/"* || $path == "$out/bin/"* ]] || fail "loaded from outside the bundle: $line"
done <<<"$trace"

if "$script" >/dev/null 2>&1; then fail "no arguments should be an error"; fi
if "$script" /nonexistent "$tmp/x" 2>"$tmp/err"; then fail "a missing binary should be an error"; fi
grep -q "/nonexistent is not an executable file" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
echo PASS
