#!/usr/bin/env bash
# The prepared GPU check (issue 20): builds --config=cuda here, bundles every
# binary the GPU run needs with their libraries, data and scripts into one
# folder, and prints the command that runs it on a lent GPU machine.
#
#   tools/gpu_check.sh                 # builds, bundles into gpu_check/
#   tools/gpu_check.sh --out=DIR       # bundles into DIR
#
# It always builds (quick when up to date): --config=cuda and the default
# configuration share bazel-bin, so what is there may be a CPU-only build.
#
# Then, through the device tool (the folder is git-ignored, so it is carried):
#   run(command="gpu_check/run.sh $OUT", carry=["gpu_check"], timeout_s=480)
# which writes $OUT/gpu_check.json, gpu_check.txt, gpu_check.log and, when
# the step benchmark ran, gpu_step_trace.json and gpu_step_trace_synced.json
# (of the 8 files a run may bring back) in under 7 minutes:
# tools/gpu_check_run.py says what each step checks.
#
# What goes in is one list, //tools:gpu_check_binaries; the folder must stay
# under 64 MiB (what a GPU run may carry): binaries are stripped, libraries
# shared. //tools:gpu_check_test bundles the same list in CI and runs the
# result under `env -i`, where it must report "no GPU" cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."

out=gpu_check
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#--out=} ;;
    *) echo "gpu_check: unknown flag $arg (use --out=DIR)" >&2; exit 2 ;;
  esac
done

[[ -d /usr/local/cuda ]] || { echo "gpu_check: needs the CUDA toolkit at /usr/local/cuda to build" >&2; exit 1; }
labels=$(bazel query --noshow_progress 'labels(srcs, //tools:gpu_check_binaries)' 2>/tmp/gpu_check_query.$$) || {
  cat /tmp/gpu_check_query.$$ >&2; rm -f /tmp/gpu_check_query.$$
  echo "gpu_check: bazel query of //tools:gpu_check_binaries failed" >&2; exit 1; }
rm -f /tmp/gpu_check_query.$$
# shellcheck disable=SC2086
bazel build --config=cuda --noshow_progress $labels

bins=()
for label in $labels; do
  # //runtime/gpu:gpu_kernels_bench -> bazel-bin/runtime/gpu/gpu_kernels_bench
  path=${label#//}
  bins+=("bazel-bin/${path/://}")
done
tools/gpu_bundle.sh "$out" "${bins[@]}"

echo
echo "On a lent GPU machine (device tool): command \"$out/run.sh \$OUT\", carry [\"$out\"], timeout_s 480"
echo "Then record what ran, on which machine and the figures in docs/gpu.md."
