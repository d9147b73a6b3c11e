#!/usr/bin/env bash
# Fit's TensorBoard event files read back by TensorBoard's own reader (from
# PyPI, in the virtual environment tools/setup.sh makes): an example trainer
# on one device and as a 2-worker cluster (the chief alone writes), its
# scalars equal to its JSON-lines metrics.
#
#   tests/tensorboard_test.sh <regression binary> <launch binary>
set -euo pipefail
regression=$1 launch=$2
python=${STRATA_TENSORBOARD_PYTHON:-/opt/strata/tensorboard-venv/bin/python}
if ! "$python" -c "import tensorboard" 2>/dev/null; then
  echo "FAIL: no TensorBoard at $python: tools/setup.sh makes that environment (pip install tensorboard)" >&2
  exit 1
fi
tmp=${TEST_TMPDIR:-$(mktemp -d)}

"$regression" --epochs=3 --quiet --tensorboard_dir="$tmp/one" --metrics_out="$tmp/one.jsonl" --tensorboard_update_steps=4
"$launch" --num_workers=2 -- "$regression" --strategy=multi_worker_mirrored --epochs=2 --quiet \
  --tensorboard_dir="$tmp/two" --metrics_out="$tmp/two.jsonl" --optimizer=sgd --learning_rate=0.05

exec "$python" "$(dirname "$0")/tensorboard_test.py" "$tmp/one" "$tmp/one.jsonl" 4 "$tmp/two" "$tmp/two.jsonl"
