#!/usr/bin/env bash
# Sets up the machine (tools/setup.sh), builds everything and runs the whole
# test suite with Bazel, then prints one summary line: "N passed, M failed",
# counting test cases (from each test's JUnit XML); a test target that fails
# to build or crashes without a report counts as one failure.
#
# Where a CUDA toolkit is installed (/usr/local/cuda), it then builds the CUDA
# configuration (`bazel build --config=cuda //...`: GPU code compiles and
# links on every run, GPU or not) and runs the CUDA-only tests under it (the
# tests whose target_compatible_with is cuda_only(): those tagged "gpu" skip
# where there is no GPU). Their cases are counted in the same summary line,
# as are the layering probes (tools/layering_check.sh), a ThreadSanitizer
# run of the collective and coordination tests, an ASan+UBSan run of the
# tests of untrusted input (clang), and a 10-second libFuzzer run of each
# fuzz target (tools/fuzz.sh, clang, on the same build).
#
#   tools/test.sh                  # everything, optimized build
#   tools/test.sh --config=asan    # under a sanitizer (extra args go to bazel;
#                                  # the CUDA step runs only without them)
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh

# A sanitizer run that failed without naming a test (a toolchain or flag
# error) counts as one failed case in the summary line.
count_unnamed_failure() {  # name rc log
  local name=$1 rc=$2 log=$3 xml
  (( rc == 0 )) && return 0
  grep -qE "^//[^ ]+ .*(FAILED|NO STATUS|TIMEOUT|INCOMPLETE|FLAKY)|errors encountered while analyzing target" "$log" \
    && return 0
  xml=$(mktemp)
  printf '<testsuite name="%s">\n  <testcase classname="phase" name="%s"><failure message="bazel exited %s naming no test"/></testcase>\n</testsuite>\n' \
    "$name" "$name" "$rc" >"$xml"
  summary_args+=(--junit="$xml")
}

# Everything must build (tests, tools, benchmarks not tagged manual).
bazel build "$@" //...
build_rc=$?

log=$(mktemp)
bazel test "$@" --keep_going //... 2>&1 | tee "$log"
test_rc=${PIPESTATUS[0]}

cuda_rc=0
summary_args=(--bazel_log="$log")
if [[ -d /usr/local/cuda && $# -eq 0 ]]; then
  cuda_log=$(mktemp)
  echo "CUDA toolkit found: building --config=cuda and running the CUDA-only tests"
  bazel build --config=cuda //...
  cuda_build_rc=$?
  cuda_tests=$(bazel query 'attr(target_compatible_with, "incompatible", tests(//...)) except attr(tags, manual, //...)' 2>/dev/null)
  cuda_test_rc=0
  if [[ -n $cuda_tests ]]; then
    # shellcheck disable=SC2086
    bazel test --config=cuda --keep_going $cuda_tests 2>&1 | tee "$cuda_log"
    cuda_test_rc=${PIPESTATUS[0]}
  fi
  if (( cuda_build_rc != 0 || cuda_test_rc != 0 )); then cuda_rc=1; fi
  summary_args+=(--bazel_log="$cuda_log" --with_cuda)
elif [[ -d /usr/local/cuda ]]; then
  echo "CUDA step skipped: extra bazel arguments ($*) given"
fi

# Visibility keeps the layers' arrows one way (analysis only, no build).
layering_xml=$(mktemp)
tools/layering_check.sh --junit="$layering_xml"
summary_args+=(--junit="$layering_xml")

# ThreadSanitizer over the collective executors and the coordination
# service, each test run 3 times: their teardown races (issue 23, defect 6)
# showed in 1 run of 7.
tsan_rc=0
if [[ $# -eq 0 ]]; then
  tsan_log=$(mktemp)
  bazel test --config=tsan --runs_per_test=3 --keep_going \
    //runtime/collective:distributed_collective_executor_test \
    //runtime/collective:local_collective_executor_test //runtime/collective:worker_pool_test \
    //runtime/collective:hang_diagnosis_test //tools:rendezvous_test \
    //runtime:multi_task_session_test //runtime/rpc:worker_service_test \
    //strategy:cluster_coordinator_test //runtime/coordination:all 2>&1 | tee "$tsan_log"
  tsan_rc=${PIPESTATUS[0]}
  summary_args+=(--bazel_log="$tsan_log")
  count_unnamed_failure tsan "$tsan_rc" "$tsan_log"
fi

# The tests of code that reads untrusted input (cluster specs, CSV files,
# GraphDefs, checkpoints, JSON, coordination RPCs, TCP frames, TLS, the fuzz
# corpora) under AddressSanitizer and UndefinedBehaviorSanitizer together,
# built with clang in its own output base (tools/clang_bazel.sh), where the
# fuzz targets below reuse the build.
asan_rc=0
if [[ $# -eq 0 ]]; then
  asan_log=$(mktemp)
  tools/clang_bazel.sh test --config=clang_asan_ubsan --keep_going \
    //train/data:csv_test //runtime/checkpoint:checkpoint_test \
    //runtime/checkpoint:checkpoint_manager_test //runtime/checkpoint:sharded_checkpoint_test \
    //graph:graph_def_import_test \
    //strategy:cluster_resolver_test //strategy:scheduler_resolvers_test //base:json_test //base:env_test \
    //strategy:distributed_dataset_test \
    //base:ip_address_test //tools:rendezvous_test //runtime/security:all \
    //runtime/coordination:all //runtime/collective:tcp_transport_test //runtime/collective:tcp_transport_security_test //tests/fuzz:all \
    //runtime:multi_task_session_test //runtime/rpc:worker_service_test \
    //kernels/cpu:partition_kernels_test //kernels/cpu:variable_kernels_test \
    2>&1 | tee "$asan_log"
  asan_rc=${PIPESTATUS[0]}
  summary_args+=(--bazel_log="$asan_log")
  count_unnamed_failure asan_ubsan "$asan_rc" "$asan_log"
fi

# A short libFuzzer run of every parser of untrusted input (clang; the
# corpora's replays ran above with the tests), one test case per target.
if [[ $# -eq 0 ]]; then
  fuzz_xml=$(mktemp)
  tools/fuzz.sh --seconds=10 --junit="$fuzz_xml"
  summary_args+=(--junit="$fuzz_xml")
fi

python3 tools/test_summary.py "${summary_args[@]}" "$@"
summary_rc=$?

if (( build_rc != 0 || test_rc != 0 || cuda_rc != 0 || tsan_rc != 0 || asan_rc != 0 || summary_rc != 0 )); then
  exit 1
fi
