#!/usr/bin/env bash
# Runs every test. Installs what it needs first (deploy/setup.sh).
# The shared fixtures are found through WASTE_TEST_MODELS (default
# ../shared/models, relative to the repository root). Extra arguments go to
# every `bazel test`.
#
# Stages (CI, .ci/run, runs them all; a failed stage is reported, the next
# ones still run, and the script exits non-zero at the end):
#   1. bazel test //...: every unit and end-to-end test (gcc), including the
#      short soak, fault-storm and crash tests (tests/soak/) and each fuzz
#      target over its committed seeds (tests/fuzz/*_fuzzer_test).
#   2. The kernels' inlining check in an optimized build (--config=opt,
#      daemon/kernels/inlining_check.sh): the ISA libraries keep nothing but
#      loops out of line.
#   3. The engine, cache, storage, text, config, HTTP, common and end-to-end
#      tests again under ASan + UBSan (--config=asan; a UBSan report fails).
#   4. Each fuzzer (tests/fuzz/run_fuzzer.sh --list) with clang, libFuzzer,
#      ASan and UBSan for WASTE_FUZZ_SECONDS (default 60; 0 skips them)
#      from its committed seed corpus.
#   5. When nvcc exists, the CUDA backend compiles (its tests SKIP without
#      a GPU; tests/gpu/run_device_check.sh runs them on one).
# WASTE_QUICK=1 runs stages 1 and 5 only: the quick check for a developer.
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/setup.sh
models="${WASTE_TEST_MODELS:-../shared/models}"
if [[ ! -d "$models" ]]; then
  echo "test: fixtures not found at $models; set WASTE_TEST_MODELS" >&2
  exit 1
fi
models="$(cd "$models" && pwd)"
# The real `openai` npm client for //tests:openai_test, at the version
# tests/openai/package-lock.json pins. Installed here, never by the test.
if command -v npm > /dev/null && [[ ! -d tests/openai/node_modules/openai ]]; then
  npm ci --prefix tests/openai --no-audit --no-fund
fi

failed=()
stage() {
  local name="$1"
  shift
  local start=$SECONDS
  echo "test: stage '$name'" >&2
  if "$@"; then
    echo "test: stage '$name' passed in $((SECONDS - start)) s" >&2
  else
    echo "test: stage '$name' FAILED after $((SECONDS - start)) s" >&2
    failed+=("$name")
  fi
}

stage "bazel test //..." bazel test //... --test_env=WASTE_TEST_MODELS="$models" "$@"

if [[ "${WASTE_QUICK:-0}" != 1 ]]; then
  stage "kernel inlining (opt)" bazel test --config=opt "$@" //daemon/kernels:inlining_check

  stage "asan+ubsan" bazel test --config=asan --test_env=WASTE_TEST_MODELS="$models" "$@" -- \
    //daemon/engine/... //daemon/cache/... //storage/... //daemon/text/... \
    //daemon/config/... //daemon/http/... //common/... //tests/...

  fuzz_seconds="${WASTE_FUZZ_SECONDS:-60}"
  if [[ "$fuzz_seconds" != 0 ]]; then
    for target in $(bash tests/fuzz/run_fuzzer.sh --list); do
      stage "fuzz $target ${fuzz_seconds}s" env WASTE_TEST_MODELS="$models" \
        bash tests/fuzz/run_fuzzer.sh "$target" "$fuzz_seconds" "${WASTE_FUZZ_DIR:-/tmp/waste-fuzz}"
    done
  fi
fi

# The CUDA backend compiles wherever the toolkit is (a compile check: its
# tests SKIP without a GPU; tests/gpu/run_device_check.sh runs them on one).
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
[[ -x "$nvcc" ]] || nvcc="$(command -v nvcc || true)"
if [[ -n "$nvcc" && -x "$nvcc" ]]; then
  stage "cuda build" bazel build --config=cuda \
    --define=cuda_home="$(dirname "$(dirname "$(realpath "$nvcc")")")" \
    //daemon/gpu/... //daemon/model:gpu_forward_test //daemon:wasted
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test: all stages passed" >&2
