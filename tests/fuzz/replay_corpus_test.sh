#!/usr/bin/env bash
# Replays a fuzz target's committed corpus (fuzz.bzl): every seed and every
# crash found so far must run without a crash or sanitizer report.
#   replay_corpus_test.sh <target binary> <corpus directory>
set -euo pipefail
exec "$1" "$2"
