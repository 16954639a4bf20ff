#!/usr/bin/env bash
# N concurrent waste-client processes against one daemon: aggregate and
# per-client decode tok/s and time to first token, for each N in a list.
# A benchmark, not a test: run it by hand on a quiet machine.
#
#   bash tests/load/concurrent_clients.sh MODEL.gguf [--sessions 1,2,4,8]
#       [--max-tokens 32] [--ram-budget SIZE] [--ctx N] [--prompt TEXT]
#
# It builds wasted and waste-client (--config=opt), serves MODEL on a
# private socket with max_concurrent_requests = the largest N, and for each
# N starts N `waste-client generate --stats` at once.
set -euo pipefail
cd "$(dirname "$0")/../.."

model="${1:?usage: concurrent_clients.sh MODEL.gguf [--sessions 1,2,4,8] [--max-tokens N] [--ram-budget SIZE] [--ctx N] [--prompt TEXT]}"
shift
sessions="1,2,4,8"
max_tokens=32
ctx=512
prompt="Once upon a time"
serve_extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sessions) sessions="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --ctx) ctx="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --ram-budget) serve_extra+=(--ram-budget "$2"); shift 2 ;;
    *) echo "concurrent_clients: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -f "$model" ]] || { echo "concurrent_clients: $model not found" >&2; exit 1; }
largest=$(tr ',' '\n' <<<"$sessions" | sort -n | tail -1)

bazel build --config=opt //daemon:wasted //client:waste-client >&2
wasted="$(pwd)/bazel-bin/daemon/wasted"
client="$(pwd)/bazel-bin/client/waste-client"
work="$(mktemp -d /tmp/waste-clients-XXXXXX)"
mkdir -p "$work/models"
ln -s "$(cd "$(dirname "$model")" && pwd)/$(basename "$model")" "$work/models/"
name="$(basename "$model" .gguf)"
"$wasted" serve --socket "$work/s.sock" --models-dir "$work/models" --follow-symlinks --ctx "$ctx" \
  --max-concurrent-requests "$largest" "${serve_extra[@]}" 2>"$work/daemon.log" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  "$client" --socket "$work/s.sock" health >/dev/null 2>&1 && break
  sleep 0.1
done
# Load the model and warm it up with one short request.
"$client" --socket "$work/s.sock" generate --model "$name" --max-tokens 2 "$prompt" >/dev/null

printf '%8s %12s %7s %13s %10s %10s %9s\n' clients aggregate gain per-client "ttft mean" "ttft max" batch
base=""
for n in ${sessions//,/ }; do
  rm -f "$work"/out.*
  start=$(date +%s.%N)
  for i in $(seq "$n"); do
    "$client" --socket "$work/s.sock" generate --model "$name" --max-tokens "$max_tokens" \
      --stats "$prompt $i" >/dev/null 2>"$work/out.$i" &
  done
  wait $(jobs -p | grep -v "^$daemon$") 2>/dev/null || true
  end=$(date +%s.%N)
  # Each client's --stats line: "... N generated ...; time to first token T ms ...;
  # decode R tok/s; S steps with B sessions on average".
  read -r generated ttft_mean ttft_max rate batch < <(cat "$work"/out.* | awk '
    /generated/ {
      for (i = 1; i <= NF; i++) {
        if ($(i+1) == "generated") g += $i
        if ($i == "token" && $(i+1) ~ /^[0-9.]+$/) { t = $(i+1); s += t; if (t > m) m = t; c++ }
        if ($(i+1) == "tok/s;" && $(i-1) == "decode") r += $i
        if ($i == "with" && $(i+2) == "sessions") b += $(i+1)
      }
    }
    END { printf "%d %.1f %.1f %.2f %.2f\n", g, c ? s / c : 0, m, c ? r / c : 0, c ? b / c : 0 }')
  aggregate=$(awk -v g="$generated" -v a="$start" -v b="$end" 'BEGIN { print g / (b - a) }')
  [[ -z "$base" ]] && base=$aggregate
  gain=$(awk -v a="$aggregate" -v b="$base" 'BEGIN { print a / b }')
  printf '%8d %8.2f t/s %6.2fx %9.2f t/s %7.0f ms %7.0f ms %9.2f\n' \
    "$n" "$aggregate" "$gain" "$rate" "$ttft_mean" "$ttft_max" "$batch"
done
echo "aggregate: generated tokens of all clients / wall time of the round (prefill included);" \
  "gain: over the first round; batch: sessions per step the requests saw" >&2
"$client" --socket "$work/s.sock" stats >&2
