#!/usr/bin/env bash
# Builds, on this machine, everything tests/gpu/run_device_check.sh runs on
# the GPU machine, into gpu-check/ (gitignored; hand it to the device run as
# a carried path): the binaries built with --config=cuda (portable ISA:
# the kernels pick AVX2/AVX-512 at run time, so a different CPU there is
# fine; internal libraries linked statically; debug info stripped), the
# stories260K fixture, and the shared libraries they need that a bare
# machine may lack (xz-compressed).
#
#   tests/gpu/build_device_check.sh [MODELS_DIR]   (default ../shared/models)
set -euo pipefail
cd "$(dirname "$0")/../.."
models=$(realpath "${1:-../shared/models}")
out=gpu-check
targets=(//daemon:wasted //daemon/gpu/cuda:cuda_device_test //daemon/model:gpu_forward_test
         //daemon/engine:engine_test)
flags=(--config=portable --config=cuda --dynamic_mode=off)
bazel build "${flags[@]}" "${targets[@]}"
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/models"
cp "$bin/daemon/wasted" "$bin/daemon/gpu/cuda/cuda_device_test" \
   "$bin/daemon/model/gpu_forward_test" "$bin/daemon/engine/engine_test" "$out/bin/"
chmod u+w "$out"/bin/*
strip --strip-debug "$out"/bin/*  # The carried folder must stay under 64 MiB.
cp -r "$models/stories260K" "$out/models/"
# Shared libraries outside the C runtime, so that a machine without this
# one's -dev packages still runs the binaries (LD_LIBRARY_PATH=gpu-check/lib).
for b in "$out"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
# Compressed: run_device_check.sh unpacks them only when a library is
# missing there.
tar -C "$out" -cJf "$out/lib.tar.xz" lib && rm -r "$out/lib"
git rev-parse HEAD > "$out/commit"
du -sh "$out" "$out"/*
