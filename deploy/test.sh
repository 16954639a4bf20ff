#!/usr/bin/env bash
# Runs every test. Installs what it needs first (deploy/setup.sh).
# The shared fixtures are found through WASTE_TEST_MODELS (default
# ../shared/models, relative to the repository root).
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
bazel test //... --test_env=WASTE_TEST_MODELS="$models" "$@"
# The CUDA backend compiles wherever the toolkit is (a compile check: its
# tests SKIP without a GPU; tests/gpu/run_device_check.sh runs them on one).
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
[[ -x "$nvcc" ]] || nvcc="$(command -v nvcc || true)"
if [[ -n "$nvcc" && -x "$nvcc" ]]; then
  bazel build --config=cuda --define=cuda_home="$(dirname "$(dirname "$(realpath "$nvcc")")")" \
    //daemon/gpu/... //daemon/model:gpu_forward_test //daemon:wasted
fi
