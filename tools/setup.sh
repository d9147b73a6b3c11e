#!/usr/bin/env bash
# Installs the Debian packages Strata's build and tests need, skipping those
# already installed. Safe to run again; used by the README's quick start and CI.
#
#   tools/setup.sh            # build + test dependencies
#   tools/setup.sh --bench    # also the peers the benchmarks compare against
#   tools/setup.sh --peers    # --bench, plus the multi-worker peers: Open MPI, Gloo C++,
#                             # and tensorflow-cpu from PyPI (tools/bench/allreduce_peers.py,
#                             # tools/bench/multiworker_throughput.py)
set -euo pipefail

bench=0 peers=0
for arg in "$@"; do
  case "$arg" in
    --bench) bench=1 ;;
    --peers) bench=1 peers=1 ;;
    *) echo "setup: unknown flag $arg (use --bench or --peers)" >&2; exit 2 ;;
  esac
done

packages=(
  bazel-bootstrap bazel-platforms bazel-skylib bazel-rules-java
  build-essential pkg-config zlib1g-dev python3 python3-venv
  libeigen3-dev
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc libssl-dev openssl
  libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev lld
  libpmix-dev
  # Tests run the trainer under a real mpirun and a real Slurm (daemons
  # started by tests/slurm_test itself).
  openmpi-bin slurm-wlm munge
)
if (( bench )); then
  # Peers for side-by-side benchmarks (see docs/performance.md).
  packages+=(libtorch-dev libopenblas0-openmp libopenblas-openmp-dev python3-torch python3-sklearn)
fi
if (( peers )); then
  # Cross-process all-reduce and multi-worker training peers.
  packages+=(openmpi-bin libopenmpi-dev libgloo-dev python3-numpy)
fi

# tensorflow-cpu comes from PyPI, into the python3 first on PATH, unless some
# interpreter here already imports it.
install_tensorflow() {
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null && TF_CPP_MIN_LOG_LEVEL=3 "$py" -c "import tensorflow" 2>/dev/null; then
      echo "setup: tensorflow present for $(command -v "$py")"
      return
    fi
  done
  echo "setup: pip install tensorflow-cpu"
  python3 -m pip install -q tensorflow-cpu
}

# TensorBoard (PyPI), whose own event reader tests/tensorboard_test runs, in
# a virtual environment of its own so that it touches no system package.
tensorboard_venv=/opt/strata/tensorboard-venv
install_tensorboard() {
  if "$tensorboard_venv/bin/python" -c "import tensorboard" 2>/dev/null; then return; fi
  echo "setup: pip install tensorboard into $tensorboard_venv"
  local SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO mkdir -p "$(dirname "$tensorboard_venv")"
  $SUDO /usr/bin/python3 -m venv "$tensorboard_venv"
  $SUDO "$tensorboard_venv/bin/pip" install -q --disable-pip-version-check tensorboard
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "setup: all ${#packages[@]} packages present"
  install_tensorboard
  if (( peers )); then install_tensorflow; fi
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# apt prints a few lines per package (hundreds for a fresh machine): they go
# to a log, shown only when apt fails.
log=$(mktemp /tmp/strata_setup.XXXXXX.log)
if ! { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "setup: apt-get failed (whole log: $log)" >&2
  exit 1
fi
echo "setup: installed ${#missing[@]} packages (apt's log: $log)"
install_tensorboard
if (( peers )); then install_tensorflow; fi
