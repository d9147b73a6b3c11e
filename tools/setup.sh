#!/usr/bin/env bash
# Installs the Debian packages Strata's build and tests need, skipping those
# already installed. Safe to run again; used by the README's quick start and CI.
#
#   tools/setup.sh            # build + test dependencies
#   tools/setup.sh --bench    # also the peers the benchmarks compare against
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms bazel-skylib bazel-rules-java
  build-essential pkg-config zlib1g-dev python3
  libeigen3-dev
  libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc
  libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
)
if [[ "${1:-}" == "--bench" ]]; then
  # Peers for side-by-side benchmarks (see docs/performance.md).
  packages+=(libtorch-dev libopenblas0-openmp libopenblas-openmp-dev python3-torch python3-sklearn)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
