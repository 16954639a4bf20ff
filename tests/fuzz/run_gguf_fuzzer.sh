#!/usr/bin/env bash
# The GGUF parser fuzz target, kept under its old name:
#   tests/fuzz/run_gguf_fuzzer.sh SECONDS [WORK_DIR]
# is run_fuzzer.sh gguf SECONDS [WORK_DIR] (see there).
set -euo pipefail
exec "$(dirname "$0")/run_fuzzer.sh" gguf "${1:?usage: $0 SECONDS [WORK_DIR]}" "${2:-/tmp/waste-fuzz}"
