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
bazel test //... --test_env=WASTE_TEST_MODELS="$models" "$@"
