#!/usr/bin/env bash
# The performance suite in one command: installs the peers, builds the
# benchmarks, runs every benchmark beside its peers in one run, and writes
# docs/performance.md with docs/perf/*.svg (tools/bench/suite/run.py).
#
#   tools/perf.sh            # full mode: more repetitions and rounds (27 minutes here under load)
#   tools/perf.sh --quick    # under 5 minutes on the 2-core machine once built
#
# --no-setup skips tools/setup.sh --peers; --no-build runs the opt binaries already built;
# --only=fit,engine runs those benchmarks and keeps the others' latest results
# in the document (each section says which run it comes from).
# Hand-written commentary for the document lives in docs/perf/notes/*.md.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=() setup=1 build=1 only=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick) ;;
    --only=*) only=("$arg") ;;
    --no-setup) setup=0 ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "perf: unknown flag $arg (use --quick, --no-setup, --no-build, --only=LIST)" >&2; exit 2 ;;
  esac
done

if (( setup )); then tools/setup.sh --peers; fi
suite=tools/bench/suite/run.py
if (( build )); then
  # shellcheck disable=SC2046  # the target list is meant to split
  bazel build -c opt $(python3 "$suite" --print_targets)
fi
# The opt build's outputs: bazel-bin follows whichever configuration was built
# last (-c dbg, --config=asan), so it may not hold the optimized binaries.
bazel_bin="$(readlink -f bazel-out 2>/dev/null || true)/k8-opt/bin"
if [[ ! -d "$bazel_bin" ]]; then bazel_bin=$(bazel info -c opt bazel-bin); fi
start=$(date +%s)
python3 "$suite" "${quick[@]}" "${only[@]}" --bazel_bin="$bazel_bin" \
  --command="tools/perf.sh${quick:+ --quick}${only:+ ${only[*]}}"
echo "perf: the suite took $(( $(date +%s) - start )) s; see docs/performance.md"
