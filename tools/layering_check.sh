#!/usr/bin/env bash
# Proves that Bazel visibility keeps the layers' arrows one way (BUILD.bazel
# at the root): for each layer it makes a throw-away package inside that layer
# with one target that depends on the layer just above (a wrong arrow), which
# must fail analysis with "is not visible", and one that depends on the layer
# just below (a right arrow), which must pass; and that the one test-only
# bridge up (//runtime:session_for_tests) is refused to production code. The packages are removed
# afterwards. tools/test.sh runs it after the tests; each probe is one test
# case of the summary line.
#
#   tools/layering_check.sh [--junit=FILE]
set -uo pipefail
cd "$(dirname "$0")/.."

junit=""
for arg in "$@"; do
  case $arg in
    --junit=*) junit=${arg#--junit=} ;;
    *) echo "layering_check: unknown flag $arg (use --junit=FILE)" >&2; exit 2 ;;
  esac
done

# layer folder | a target of the layer above (must be refused) | a target below (must be accepted)
probes=(
  "base|//proto:framework_proto|"
  "proto|//graph:core|//base:status"
  "graph|//kernels:framework|//proto:framework_proto"
  "kernels|//runtime:session|//graph:core"
  "runtime|//train|//kernels:framework"
  "train|//strategy|//runtime:session"
  "strategy|//tools:trainer_lib|//train"
)

pkgs=()
cleanup() { for p in "${pkgs[@]}"; do rm -rf "$p"; done; }
trap cleanup EXIT

passed=0 failed=0 cases=""
record() {  # name, ok (0/1), message
  if (( $2 == 0 )); then
    passed=$((passed + 1))
    cases+="  <testcase classname=\"layering\" name=\"$1\"/>"$'\n'
    echo "layering: ok   $1"
  else
    failed=$((failed + 1))
    local msg=${3//&/&amp;}
    msg=${msg//</&lt;}
    msg=${msg//>/&gt;}
    msg=${msg//\"/&quot;}
    cases+="  <testcase classname=\"layering\" name=\"$1\"><failure message=\"$msg\"/></testcase>"$'\n'
    echo "layering: FAIL $1: $3" >&2
  fi
}

for probe in "${probes[@]}"; do
  IFS='|' read -r layer above below <<<"$probe"
  up=${above#//}; up=${up%%[:/]*}
  down=${below#//}; down=${down%%[:/]*}
  pkg=$layer/layering_probe_tmp
  pkgs+=("$pkg")
  mkdir -p "$pkg"
  {
    echo 'cc_library(name = "uses_layer_above", deps = ["'"$above"'"])'
    [[ -n $below ]] && echo 'cc_library(name = "uses_layer_below", deps = ["'"$below"'"])'
  } >"$pkg/BUILD.bazel"

  out=$(bazel build --nobuild --noshow_progress "//$pkg:uses_layer_above" 2>&1)
  if [[ $? -ne 0 && $out == *"is not visible from target"* ]]; then
    record "${layer}_may_not_use_${up}" 0
  else
    record "${layer}_may_not_use_${up}" 1 \
      "//$pkg depending on $above was not refused for visibility: $(tail -n 3 <<<"$out")"
  fi
  if [[ -n $below ]]; then
    out=$(bazel build --nobuild --noshow_progress "//$pkg:uses_layer_below" 2>&1)
    if [[ $? -eq 0 ]]; then
      record "${layer}_may_use_${down}" 0
    else
      record "${layer}_may_use_${down}" 1 \
        "//$pkg depending on $below was refused: $(tail -n 3 <<<"$out")"
    fi
  fi
done

# A test-only bridge up (//runtime:session_for_tests, for graph/gradients'
# numeric checks) is visible to the lower layers but refused to anything that
# is not testonly.
pkg=graph/layering_probe_tmp
pkgs+=("$pkg")
mkdir -p "$pkg"
echo 'cc_library(name = "uses_test_bridge", deps = ["//runtime:session_for_tests"])' >"$pkg/BUILD.bazel"
out=$(bazel build --nobuild --noshow_progress "//$pkg:uses_test_bridge" 2>&1)
if [[ $? -ne 0 && $out == *"depends on testonly target"* ]]; then
  record "graph_production_may_not_use_runtime_test_bridge" 0
else
  record "graph_production_may_not_use_runtime_test_bridge" 1 \
    "//$pkg depending on //runtime:session_for_tests was not refused as testonly: $(tail -n 3 <<<"$out")"
fi

if [[ -n $junit ]]; then
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites><testsuite name=\"layering\" tests=\"$((passed + failed))\" failures=\"$failed\">"
    printf '%s' "$cases"
    echo '</testsuite></testsuites>'
  } >"$junit"
fi
echo "layering: $passed passed, $failed failed"
(( failed == 0 ))
