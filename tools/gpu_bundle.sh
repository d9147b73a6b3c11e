#!/usr/bin/env bash
# Makes the GPU check's folder from built binaries (tools/gpu_check.sh builds
# them and calls this; //tools:gpu_check_test calls it on Bazel's runfiles):
#
#   tools/gpu_bundle.sh OUT_DIR BINARY...
#
# OUT_DIR gets:
#   bundle.tar.xz  every binary bundled by tools/bundle_gpu.sh (one shared
#                  lib/, a wrapper per binary, the digits data in the runfiles
#                  of those that use it), stripped of symbols, with run.py
#                  (tools/gpu_check_run.py) and gpu_step_bench.py;
#   run.sh         unpacks it into $TMPDIR and runs run.py;
#   MANIFEST       every file of the unpacked bundle and its size.
# The binaries unpacked are about 60 MiB, which with the working tree would
# not fit the 64 MiB a GPU run may carry; packed they are about a quarter.
# Refuses, naming the size, an OUT_DIR over 56 MiB (8 MiB are left for the
# working tree that travels with it, 3.5 MiB today).
set -euo pipefail

usage() { echo "usage: $0 OUT_DIR BINARY..." >&2; exit 2; }
(( $# >= 2 )) || usage
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
limit=$((56 * 1024 * 1024))

rm -rf "$out"
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for bin in "$@"; do
  "$here/bundle_gpu.sh" "$bin" "$stage" >/dev/null
done
# Symbols only matter to a debugger, which the GPU machine lacks (stack
# traces keep their addresses); the binaries shrink by about half.
for f in "$stage"/bin/*; do
  [[ -f $f ]] && strip --strip-unneeded "$f"
done
cp "$here/gpu_check_run.py" "$stage/run.py"
cp "$here/bench/gpu_step_bench.py" "$stage/gpu_step_bench.py"
cp "$here/bench/lm_torch.py" "$stage/lm_torch.py"
chmod +x "$stage/run.py"
(cd "$stage" && find . -type f -printf '%s %p\n' | sort -k2) >"$out/MANIFEST"
unpacked=$(du -sb "$stage" | awk '{print $1}')
tar -C "$stage" -cf - . | xz -T2 -6 >"$out/bundle.tar.xz"

cat >"$out/run.sh" <<'RUN'
#!/bin/sh
# The GPU check (tools/gpu_check.sh): unpacks bundle.tar.xz into a scratch
# folder and runs run.py (tools/gpu_check_run.py) from it; the report goes to
# the folder given (default: $OUT, else ./gpu_check_results). Exit status as
# run.py's: 0 passed, 1 failed, 2 no GPU.
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${OUT:-gpu_check_results}}
[ $# -gt 0 ] && shift
PATH=${PATH:-/usr/local/bin:/usr/bin:/bin}
export PATH
mkdir -p "$dir" || exit 1
fail() {
  printf '%s\n' "$1" >"$dir/gpu_check.txt"
  printf '{"status": "failed", "error": "%s"}\n' "$1" >"$dir/gpu_check.json"
  echo "gpu_check: $1" >&2
  exit 1
}
command -v python3 >/dev/null 2>&1 ||
  fail "the GPU check needs python3 (with PyTorch for the step benchmark); none on PATH ($PATH)"
work=${TMPDIR:-/tmp}/strata_gpu_check_$$
rm -rf "$work" && mkdir -p "$work" || fail "cannot make the scratch folder $work"
# Python unpacks (its lzma module), so that no xz program is needed there.
python3 - "$here/bundle.tar.xz" "$work" <<'PY' || fail "cannot unpack $here/bundle.tar.xz into $work"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "fully_trusted_filter"):
        t.extractall(sys.argv[2], filter="fully_trusted")
    else:
        t.extractall(sys.argv[2])
PY
PYTHONUNBUFFERED=1 python3 "$work/run.py" "$dir" "$@"
rc=$?
rm -rf "$work"
exit $rc
RUN
chmod +x "$out/run.sh"

total=$(du -sb "$out" | awk '{print $1}')
if (( total > limit )); then
  echo "$0: $out is $((total / 1024 / 1024)) MiB packed, over the 56 MiB a GPU run may carry beside the working tree; largest unpacked:" >&2
  sort -rn "$out/MANIFEST" | head -n 8 >&2
  exit 1
fi
echo "bundled $# binaries into $out: $((total / 1024 / 1024)) MiB packed ($((unpacked / 1024 / 1024)) MiB unpacked, $(ls "$stage/lib" | wc -l) libraries)"
