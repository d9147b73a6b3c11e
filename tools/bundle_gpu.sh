#!/usr/bin/env bash
# Bundles a built Strata binary so it runs on a machine with CUDA but without
# Bazel or Debian's libraries (the lent GPU machines: their CUDA, cuBLAS and
# NCCL are the ones PyTorch's pip packages ship, nvidia-*-cu13 under
# site-packages/nvidia/*/lib).
#
#   bazel build --config=cuda //tools:trainer
#   tools/bundle_gpu.sh bazel-bin/tools/trainer /tmp/trainer_bundle
#   /tmp/trainer_bundle/trainer --model=mlp          # on the GPU machine
#
# The folder gets:
#   bin/NAME            the binary (and bin/NAME.runfiles when Bazel made one)
#   lib/                every shared library ldd finds for it, the C library
#                       and its loader included (the GPU machine's glibc may be
#                       older than Debian's), except the CUDA family: libcuda,
#                       libcudart, libcublas(Lt), libnccl, libnvidia-*, libcudnn
#   NAME                a wrapper that runs bin/NAME through the bundled loader
#                       with lib/ first on the library path, then the CUDA
#                       libraries it finds: $STRATA_CUDA_LIBS (colon-separated),
#                       else site-packages/nvidia/*/lib of python3, else
#                       /usr/local/cuda/lib64; the driver's libcuda comes from
#                       the system's loader cache. STRATA_BUNDLE_LIST=1 makes
#                       it print where each library would come from instead.
# Extra arguments after the folder are copied into it (data files, scripts).
set -euo pipefail

usage() { echo "usage: $0 BINARY OUT_DIR [EXTRA_FILE...]" >&2; exit 2; }
(( $# >= 2 )) || usage
bin=$1
out=$2
shift 2
[[ -f $bin && -x $bin ]] || { echo "$0: $bin is not an executable file" >&2; exit 1; }
command -v ldd >/dev/null || { echo "$0: ldd not found" >&2; exit 1; }
name=$(basename "$bin")

mkdir -p "$out/bin" "$out/lib"
cp -fL "$bin" "$out/bin/$name"
chmod u+w "$out/bin/$name"
if [[ -d "$bin.runfiles" ]]; then
  rm -rf "$out/bin/$name.runfiles"
  cp -rL "$bin.runfiles" "$out/bin/$name.runfiles"
  # The runfiles hold the binary itself and, for tests, the shared libraries
  # of its Bazel dependencies (_solib_*): both are already in bin/ and lib/.
  find "$out/bin/$name.runfiles" -depth \( -name '_solib_*' -o -type f -name "$name" \) \
    -exec rm -rf {} +
fi
for extra in "$@"; do cp -rL "$extra" "$out/"; done

# ldd lines: "libfoo.so.1 => /path/libfoo.so.1 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)".
ldd_out=$(ldd "$bin") || { echo "$0: ldd $bin failed: $ldd_out" >&2; exit 1; }
if grep -q "not found" <<<"$ldd_out"; then
  echo "$0: $bin needs libraries this machine lacks:" >&2
  grep "not found" <<<"$ldd_out" >&2
  exit 1
fi
loader=""
skipped=()
while read -r line; do
  path=""
  if [[ $line == *"=>"* ]]; then
    path=$(awk '{print $3}' <<<"$line")
  elif [[ $line == /* ]]; then
    path=$(awk '{print $1}' <<<"$line")
  fi
  [[ -n $path && -f $path ]] || continue
  lib=$(basename "$path")
  case $lib in
    libcuda.so*|libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*|libnvidia-*|libcudnn*.so*)
      skipped+=("$lib"); continue ;;
    ld-linux*) loader=$lib ;;
  esac
  cp -fL "$path" "$out/lib/$lib"
done <<<"$ldd_out"
[[ -n $loader ]] || { echo "$0: ldd named no dynamic loader for $bin (static binary?)" >&2; exit 1; }

cat >"$out/$name" <<WRAPPER
#!/bin/sh
# Runs $name with the libraries bundled beside it (tools/bundle_gpu.sh).
here=\$(cd "\$(dirname "\$0")" && pwd)
cuda_libs=\${STRATA_CUDA_LIBS:-}
if [ -z "\$cuda_libs" ] && command -v python3 >/dev/null 2>&1; then
  cuda_libs=\$(python3 -c 'import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
dirs = sorted({d for r in roots for d in glob.glob(os.path.join(r, "nvidia", "*", "lib"))})
print(":".join(dirs))' 2>/dev/null || true)
fi
if [ -z "\$cuda_libs" ] && [ -d /usr/local/cuda/lib64 ]; then cuda_libs=/usr/local/cuda/lib64; fi
path="\$here/lib\${cuda_libs:+:\$cuda_libs}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
if [ -d "\$here/bin/$name.runfiles" ] && [ -z "\${RUNFILES_DIR:-}" ]; then
  RUNFILES_DIR="\$here/bin/$name.runfiles"; export RUNFILES_DIR
fi
if [ -n "\${STRATA_BUNDLE_LIST:-}" ]; then
  # Where each library would come from, instead of running.
  exec "\$here/lib/$loader" --list --library-path "\$path" "\$here/bin/$name"
fi
exec "\$here/lib/$loader" --library-path "\$path" "\$here/bin/$name" "\$@"
WRAPPER
chmod +x "$out/$name"

echo "bundled $name into $out ($(ls "$out/lib" | wc -l) libraries)"
if (( ${#skipped[@]} > 0 )); then
  echo "left for the GPU machine to provide: ${skipped[*]}"
fi
