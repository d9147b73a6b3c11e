#!/usr/bin/env bash
# Runs bazel in the workspace's clang output base
# (~/.cache/strata_fuzz/<workspace hash>, or $STRATA_FUZZ_OUTPUT_BASE):
# the clang configurations (--config=clang_asan_ubsan, --config=fuzz) build
# there, the gcc ones in the main output base, neither discarding the other's
# cache (a compiler switch reconfigures the C++ toolchain). No convenience
# symlinks (--symlink_prefix=/): a bazel-* link to the other output base inside
# the workspace would be walked by `bazel build //...`.
#
#   tools/clang_bazel.sh test --config=clang_asan_ubsan //base:json_test
#   tools/clang_bazel.sh --print_output_base
set -euo pipefail
cd "$(dirname "$0")/.."
# One output base per workspace (an output base serves one workspace).
output_base=${STRATA_FUZZ_OUTPUT_BASE:-$HOME/.cache/strata_fuzz/$(pwd | md5sum | cut -c1-12)}
if [[ ${1:-} == --print_output_base ]]; then
  echo "$output_base"
  exit 0
fi
if ! command -v clang >/dev/null; then
  echo "clang_bazel: clang is not installed (tools/setup.sh installs it)" >&2
  exit 2
fi
if (( $# == 0 )); then
  echo "clang_bazel: give a bazel command (build, test, info ...)" >&2
  exit 2
fi
command=$1
shift
case $command in
  build | test | run) exec bazel --output_base="$output_base" "$command" --symlink_prefix=/ "$@" ;;
  *) exec bazel --output_base="$output_base" "$command" "$@" ;;
esac
