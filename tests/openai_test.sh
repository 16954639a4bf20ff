#!/usr/bin/env bash
# Runs tests/openai/openai.test.js, which drives wasted's HTTP face with the
# real `openai` npm client, against a daemon serving stories260K on a free
# loopback port with an API key.
#
# The client is installed by `npm ci --prefix tests/openai` (deploy/test.sh
# does it when node_modules is missing); this test never downloads. Without
# Node it skips; with Node but without the installed client it fails and
# says what to run.
set -euo pipefail

models="${WASTE_TEST_MODELS:-../shared/models}"
if [[ ! -f "$models/stories260K/stories260K.gguf" ]]; then
  echo "test fixture not found: $models/stories260K; set WASTE_TEST_MODELS" >&2
  exit 1
fi
if ! command -v node > /dev/null; then
  echo "SKIPPED: node is not installed, so the openai client test did not run" >&2
  exit 0
fi
# Node resolves `import 'openai'` from the test file's real location: the
# source tree's tests/openai/node_modules.
test_js="$(readlink -f tests/openai/openai.test.js)"
if [[ ! -f "$(dirname "$test_js")/node_modules/openai/package.json" ]]; then
  echo "the openai npm client is not installed: run npm ci --prefix tests/openai" \
       "(deploy/test.sh does)" >&2
  exit 1
fi

scratch="$(mktemp -d "${TEST_TMPDIR:-/tmp}/openai.XXXXXX")"
socket_dir="$(mktemp -d /tmp/waste-openai.XXXXXX)"  # Unix socket paths are short.
key="sk-node-$RANDOM$RANDOM$RANDOM"
log="$scratch/wasted.log"
: > "$log"  # Before the daemon's shell opens it: the loop below reads it at once.
daemon/wasted serve --socket "$socket_dir/w.sock" --models-dir "$models/stories260K" \
  --http-listen 127.0.0.1:0 --kv-type f32 --api-key "$key" 2> "$log" &
pid=$!
cleanup() {
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  rm -rf "$socket_dir"
}
trap cleanup EXIT

port=""
for _ in $(seq 600); do
  port="$(sed -n 's|.*serving HTTP on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")"
  [[ -n "$port" ]] && break
  if ! kill -0 "$pid" 2> /dev/null; then
    echo "wasted exited; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$port" ]]; then
  echo "wasted never logged its HTTP port; its log:" >&2
  cat "$log" >&2
  exit 1
fi

status=0
HOME="$scratch" WASTE_BASE_URL="http://127.0.0.1:$port/v1" WASTE_API_KEY="$key" \
  WASTE_GOLDEN_TEXT="$models/stories260K/golden/greedy_from_bos_256.txt" \
  node --test "$test_js" || status=$?
if [[ $status -ne 0 ]]; then
  echo "--- wasted's log:" >&2
  cat "$log" >&2
fi
exit "$status"
