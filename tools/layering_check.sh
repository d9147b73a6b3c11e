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
  "strategy|//fit:strategy_flags|//train"
  "fit|//tools:trainer_lib|//strategy"
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

# probe NAME LAYER DEP EXPECT: a throw-away package in LAYER with one
# cc_library that depends on DEP; EXPECT is "refused:TEXT" (analysis must
# fail, saying TEXT) or "accepted".
probe() {
  local name=$1 layer=$2 dep=$3 expect=$4
  local pkg=$layer/layering_probe_tmp
  pkgs+=("$pkg")
  mkdir -p "$pkg"
  echo 'cc_library(name = "probe", deps = ["'"$dep"'"])' >"$pkg/BUILD.bazel"
  local out rc
  out=$(bazel build --nobuild --noshow_progress "//$pkg:probe" 2>&1)
  rc=$?
  if [[ $expect == accepted ]]; then
    if (( rc == 0 )); then record "$name" 0; else
      record "$name" 1 "//$pkg depending on $dep was refused: $(tail -n 3 <<<"$out")"; fi
  else
    local text=${expect#refused:}
    if (( rc != 0 )) && [[ $out == *"$text"* ]]; then record "$name" 0; else
      record "$name" 1 "//$pkg depending on $dep was not refused ($text): $(tail -n 3 <<<"$out")"; fi
  fi
}

for p in "${probes[@]}"; do
  IFS='|' read -r layer above below <<<"$p"
  up=${above#//}; up=${up%%[:/]*}
  probe "${layer}_may_not_use_${up}" "$layer" "$above" "refused:is not visible from target"
  if [[ -n $below ]]; then
    down=${below#//}; down=${down%%[:/]*}
    probe "${layer}_may_use_${down}" "$layer" "$below" accepted
  fi
done

# The one test-only bridge up (//runtime:session_for_tests, for
# graph/gradients' numeric checks) is visible to the lower layers but
# refused to anything that is not testonly.
probe graph_production_may_not_use_runtime_test_bridge graph //runtime:session_for_tests \
  "refused:depends on testonly target"

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
