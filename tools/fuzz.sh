#!/usr/bin/env bash
# Fuzzes every target of tests/fuzz with libFuzzer (clang, AddressSanitizer,
# UndefinedBehaviorSanitizer) for a fixed time each, starting from its
# committed corpus, and reports executions per second and coverage. New
# inputs go to a scratch directory, never into the committed corpus; a crash
# is reported with its input (add it to tests/fuzz/corpus/<target>/ with the
# fix, and <target>_corpus_test replays it from then on); the scratch
# directory is kept only then.
#
#   tools/fuzz.sh                       # 60 s per target
#   tools/fuzz.sh --seconds=600         # the issue's 10 minutes per target
#   tools/fuzz.sh --only=csv_fuzz,json_fuzz --seconds=30
#   tools/fuzz.sh --seconds=10 --junit=FILE   # as tools/test.sh runs it: one
#                                             # test case per target
#
# Builds in the clang output base (tools/clang_bazel.sh), reusing the objects
# of tools/test.sh's clang_asan_ubsan build there. Exit status: 0 when no
# target crashed.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=60 only="" junit=""
for arg in "$@"; do
  case $arg in
    --seconds=*) seconds=${arg#--seconds=} ;;
    --only=*) only=${arg#--only=} ;;
    --junit=*) junit=${arg#--junit=} ;;
    *) echo "fuzz: unknown flag $arg (use --seconds=N, --only=a,b or --junit=FILE)" >&2; exit 2 ;;
  esac
done
cases=""
xml_escape() { local m=${1//&/&amp;}; m=${m//</&lt;}; m=${m//>/&gt;}; printf '%s' "${m//\"/&quot;}"; }
write_junit() {  # the cases so far, or one failed case named $1 with message $2
  [[ -z $junit ]] && return 0
  local extra=""
  if [[ -n ${1:-} ]]; then
    extra="  <testcase classname=\"fuzz\" name=\"$1\"><failure message=\"$(xml_escape "$2")\"/></testcase>"$'\n'
  fi
  printf '<testsuite name="fuzz">\n%s%s</testsuite>\n' "$cases" "$extra" >"$junit"
}
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "fuzz: --seconds must be a positive whole number, not '$seconds'" >&2
  exit 2
fi
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (apt-get install clang libclang-rt-14-dev)" >&2
  write_junit build "clang is not installed"
  exit 2
fi

targets=()
for dir in tests/fuzz/corpus/*/; do
  t=$(basename "$dir")
  if [[ -n $only && ",$only," != *",$t,"* ]]; then continue; fi
  targets+=("$t")
done
if (( ${#targets[@]} == 0 )); then
  echo "fuzz: no target matches --only=$only" >&2
  exit 2
fi

echo "fuzz: building ${#targets[@]} targets with clang (output base $(tools/clang_bazel.sh --print_output_base))"
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
if ! tools/clang_bazel.sh build --config=fuzz --noshow_progress "${labels[@]}" \
    2>/tmp/strata_fuzz_build.log; then
  tail -30 /tmp/strata_fuzz_build.log >&2
  echo "fuzz: build failed (whole log: /tmp/strata_fuzz_build.log)" >&2
  write_junit build "the clang build of the fuzz targets failed"
  exit 1
fi

bin=$(tools/clang_bazel.sh info --config=fuzz bazel-bin 2>/dev/null)
scratch=$(mktemp -d /tmp/strata_fuzz.XXXXXX)
crashed=0
printf '%-20s %10s %12s %8s %8s  %s\n' target seconds "execs/s" cov ft result
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t/new" "$scratch/$t/artifacts"
  log="$scratch/$t/log.txt"
  "$bin/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$scratch/$t/artifacts/" \
    "$scratch/$t/new" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  result=ok
  if (( rc != 0 )); then
    crashed=1
    artifact=$(ls "$scratch/$t/artifacts/" 2>/dev/null | head -1)
    result="CRASH (exit $rc): input $scratch/$t/artifacts/$artifact, log $log"
  fi
  printf '%-20s %10s %12s %8s %8s  %s\n' "$t" "$seconds" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result"
  if [[ $result == ok ]]; then
    cases+="  <testcase classname=\"fuzz\" name=\"$t\"/>"$'\n'
  else
    cases+="  <testcase classname=\"fuzz\" name=\"$t\"><failure message=\"$(xml_escape "$result")\"/></testcase>"$'\n'
  fi
done
write_junit
rm -rf /tmp/strata_csv_fuzz_* /tmp/strata_ckpt_fuzz_*
if (( crashed )); then
  echo "fuzz: scratch corpora, crashing inputs and logs in $scratch"
else
  rm -rf "$scratch"
fi
exit $crashed
