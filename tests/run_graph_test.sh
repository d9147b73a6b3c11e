#!/usr/bin/env bash
# run_graph on TensorFlow's interop graphs, checked with numpy (from the
# TensorBoard environment tools/setup.sh makes): tests/run_graph_test.py.
#
#   tests/run_graph_test.sh <run_graph binary>
set -euo pipefail
python=${STRATA_TENSORBOARD_PYTHON:-/opt/strata/tensorboard-venv/bin/python}
if ! "$python" -c "import numpy, tensorboard" 2>/dev/null; then
  echo "FAIL: no numpy and TensorBoard at $python: tools/setup.sh makes that environment" >&2
  exit 1
fi
tmp=${TEST_TMPDIR:-$(mktemp -d)}
here=$(dirname "$0")
exec "$python" "$here/run_graph_test.py" "$1" "$here/testdata/tf_interop" "$tmp"
