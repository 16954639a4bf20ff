#!/usr/bin/env bash
# The main job: build waste, start the daemon on a private socket, and use it
# through waste-client. Installs what it needs first (deploy/setup.sh).
#
#   bash deploy/run.sh                      # a demo model made by `wasted mkmodel`
#   MODEL=/path/to/model.gguf bash deploy/run.sh
#   MODEL=/path/to/model-00001-of-00004.gguf bash deploy/run.sh   (split: its first part)
#   bash deploy/run.sh --model /path/to/model.gguf [--prompt TEXT] [--max-tokens N]
#                      [--ram-budget SIZE]   (RAM_BUDGET=8GiB works too)
#
# Without a model it makes a ~170 MB demo model with `wasted mkmodel` (random
# weights: the text is noise) and serves it under a 160 MiB RAM budget, so
# part of the weights stream from disk for every token: --stats shows the
# cache hits, misses and bytes read.
set -euo pipefail
cd "$(dirname "$0")/.."

model="${MODEL:-}"
ctx_flags=()
prompt="${PROMPT:-Once upon a time}"
max_tokens="${MAX_TOKENS:-64}"
ram_budget="${RAM_BUDGET:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --ram-budget) ram_budget="$2"; shift 2 ;;
    *) echo "run: unknown argument $1" >&2; exit 2 ;;
  esac
done

bash deploy/setup.sh
bazel build --config=opt //daemon:wasted //client:waste-client
wasted="$(pwd)/bazel-bin/daemon/wasted"
client="$(pwd)/bazel-bin/client/waste-client"

work="$(mktemp -d /tmp/waste-run-XXXXXX)"
socket="$work/wasted.sock"
models="$work/models"
mkdir -p "$models"
if [[ -n "$model" ]]; then
  [[ -f "$model" ]] || { echo "run: model file $model not found" >&2; exit 1; }
  dir="$(cd "$(dirname "$model")" && pwd)"
  base="$(basename "$model")"
  if [[ "$base" =~ ^(.+)-00001-of-([0-9]{5})\.gguf$ ]]; then
    # Split by gguf-split: every part goes along; the model is named without
    # the part suffix.
    name="${BASH_REMATCH[1]}"
    for part in "$dir/$name"-[0-9][0-9][0-9][0-9][0-9]-of-"${BASH_REMATCH[2]}".gguf; do
      ln -s "$part" "$models/"
    done
  else
    ln -s "$dir/$base" "$models/"
    name="$(basename "$model" .gguf)"
  fi
else
  echo "run: no MODEL given; making a demo model (random weights: the text is noise)" >&2
  demo_dir="${XDG_CACHE_HOME:-$HOME/.cache}/waste/demo"
  mkdir -p "$demo_dir"
  if [[ ! -f "$demo_dir/demo-llama-170m.gguf" ]]; then
    "$wasted" mkmodel --arch llama --out "$demo_dir/demo-llama-170m.gguf" \
      --dim 1024 --layers 12 --heads 16 --kv-heads 4 --ffn 2816 --vocab 4096 --type q8_0 --seed 1
  fi
  ln -s "$demo_dir/demo-llama-170m.gguf" "$models/"
  name="demo-llama-170m"
  ram_budget="${ram_budget:-160MiB}"
  ctx_flags=(--ctx 1024)
fi

serve_flags=(--socket "$socket" --models-dir "$models" --follow-symlinks "${ctx_flags[@]}")
if [[ -n "$ram_budget" ]]; then
  serve_flags+=(--ram-budget "$ram_budget")
fi
"$wasted" serve "${serve_flags[@]}" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  "$client" --socket "$socket" health >/dev/null 2>&1 && break
  sleep 0.2
done

set -x
"$client" --socket "$socket" health
"$client" --socket "$socket" models
"$client" --socket "$socket" plan --model "$name" ${ram_budget:+--ram-budget "$ram_budget"} "${ctx_flags[@]}"
"$client" --socket "$socket" generate --model "$name" --max-tokens "$max_tokens" --stats "$prompt"
