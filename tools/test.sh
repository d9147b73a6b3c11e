#!/usr/bin/env bash
# Sets up the machine (tools/setup.sh), builds everything and runs the whole
# test suite with Bazel, then prints one summary line: "N passed, M failed",
# counting test cases (from each test's JUnit XML); a test target that fails
# to build or crashes without a report counts as one failure.
#
#   tools/test.sh                  # everything, optimized build
#   tools/test.sh --config=asan    # under a sanitizer (extra args go to bazel)
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh

# Everything must build (tests, tools, benchmarks not tagged manual).
bazel build "$@" //...
build_rc=$?

log=$(mktemp)
bazel test "$@" --keep_going //... 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}

python3 tools/test_summary.py --bazel_log="$log" "$@"
summary_rc=$?

if (( build_rc != 0 || test_rc != 0 || summary_rc != 0 )); then exit 1; fi
