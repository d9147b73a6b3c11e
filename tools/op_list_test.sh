#!/usr/bin/env bash
# docs/ops.md must be what op_list prints now: a stale list fails here.
set -euo pipefail
op_list=$1 doc=$2
if ! diff -u "$doc" <("$op_list") > /tmp/op_list_test.diff.$$; then
  echo "op_list_test: docs/ops.md is stale; regenerate it with" >&2
  echo "  bazel run --config=cuda //tools:op_list > docs/ops.md" >&2
  head -40 /tmp/op_list_test.diff.$$ >&2
  rm -f /tmp/op_list_test.diff.$$
  exit 1
fi
rm -f /tmp/op_list_test.diff.$$
echo "op_list_test: docs/ops.md is current"
