#!/usr/bin/env bash
# Decode tok/s under CPU contention, in one table: what a descheduled compute
# thread costs (issue 15).
#
#   daemon/bench/contention.sh MODEL.gguf [N]
#
# N (default: the physical cores of this process's CPU mask) compute threads
# run on N CPUs, one per physical core, under four conditions:
#   alone          N threads on the N CPUs
#   1 thread       1 thread on the first of them
#   2N on N cores  2N threads squeezed onto the same N CPUs
#   beside hog     N threads on the N CPUs while $HOGS busy-looping processes
#                  (default 1) run pinned to the first of them
# Each is `wasted bench MODEL --json` run $REPS times (default 3); the table
# gives the median decode tok/s (min-max in brackets) and the ratio to
# `alone`. Run it on an otherwise quiet machine.
#
# Environment:
#   WASTED         the daemon binary (default bazel-bin/daemon/wasted; build it
#                  with `bazel build --config=opt //daemon:wasted`)
#   GEN_TOKENS     tokens decoded per run (default 64)
#   PROMPT_TOKENS  prefill length (default 16)
#   REPS           runs per condition (default 3)
#   HOGS           busy-looping processes in the hog condition (default 1)
#   BENCH_FLAGS    more flags for `wasted bench` (default: --mem-bench-bytes
#                  64MiB, to keep the bandwidth probe short)
#   LLAMA_BENCH    path to llama.cpp's llama-bench: adds its decode figures
#                  (`-p 0 -n GEN_TOKENS -t T`) under the same conditions
#   LLAMA_CLI      or path to llama-cli (used when LLAMA_BENCH is unset): its
#                  "eval time ... tokens per second" line, with LLAMA_CLI_FLAGS
#                  (default -no-cnv) for its interactive mode
set -euo pipefail

model="${1:?usage: $0 MODEL.gguf [N]}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
wasted="${WASTED:-$repo/bazel-bin/daemon/wasted}"
gen="${GEN_TOKENS:-64}"
prompt="${PROMPT_TOKENS:-16}"
reps="${REPS:-3}"
hogs="${HOGS:-1}"
read -r -a bench_flags <<<"${BENCH_FLAGS:---mem-bench-bytes 64MiB}"
read -r -a llama_cli_flags <<<"${LLAMA_CLI_FLAGS:--no-cnv}"

[[ -f "$model" ]] || { echo "$0: no model at $model" >&2; exit 2; }
[[ -x "$wasted" ]] || {
  echo "$0: $wasted is missing; bazel build --config=opt //daemon:wasted" >&2
  exit 2
}
command -v taskset >/dev/null || { echo "$0: needs taskset (util-linux)" >&2; exit 2; }

# One CPU per physical core, from those this process may use: the first CPU
# seen of each (socket, core) pair.
mapfile -t allowed < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }')
declare -A is_allowed=()
for c in "${allowed[@]}"; do is_allowed[$c]=1; done
core_cpus=()
if command -v lscpu >/dev/null; then
  declare -A seen_core=()
  while IFS=, read -r cpu core socket; do
    [[ "$cpu" == \#* || -z "${is_allowed[$cpu]:-}" ]] && continue
    key="$socket/$core"
    [[ -n "${seen_core[$key]:-}" ]] && continue
    seen_core[$key]=1
    core_cpus+=("$cpu")
  done < <(lscpu -p=CPU,CORE,SOCKET)
fi
((${#core_cpus[@]} > 0)) || core_cpus=("${allowed[@]}")

n="${2:-${#core_cpus[@]}}"
if ((n < 1 || n > ${#core_cpus[@]})); then
  echo "$0: N=$n, but this process has ${#core_cpus[@]} physical cores" >&2
  exit 2
fi
cpus="$(IFS=,; echo "${core_cpus[*]:0:n}")"
first="${core_cpus[0]}"

hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
start_hogs() {
  for ((i = 0; i < hogs; i++)); do
    # The timeout is a backstop should this script die without its trap.
    taskset -c "$first" timeout 3600 sh -c 'while :; do :; done' &
    hog_pids+=("$!")
  done
  sleep 0.2
}

# median, min and max of the numbers on stdin: "MED [MIN-MAX]".
summarize() {
  sort -g | awk '{ v[NR] = $1 }
    END {
      if (NR == 0) { print "failed"; exit }
      med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%.2f [%.2f-%.2f]\n", med, v[1], v[NR]
    }'
}

# One decode tok/s figure from `wasted bench`, or nothing if the run failed.
waste_run() {  # CPUS THREADS
  taskset -c "$1" "$wasted" bench "$model" --threads "$2" --gen-tokens "$gen" \
    --prompt-tokens "$prompt" --json "${bench_flags[@]}" 2>/dev/null |
    grep -o '"decode_tokens_per_second": *[0-9.eE+-]*' | sed 's/.*: *//' || true
}

llama_run() {  # CPUS THREADS
  if [[ -n "${LLAMA_BENCH:-}" ]]; then
    # -p 0: the decode test only, so the one avg_ts is its tok/s.
    taskset -c "$1" "$LLAMA_BENCH" -m "$model" -t "$2" -p 0 -n "$gen" -r 1 -o json 2>/dev/null |
      grep -o '"avg_ts": *[0-9.eE+-]*' | sed 's/.*: *//' || true
  elif [[ -n "${LLAMA_CLI:-}" ]]; then
    taskset -c "$1" "$LLAMA_CLI" -m "$model" -t "$2" -n "$gen" -p "Once upon a time" \
      "${llama_cli_flags[@]}" </dev/null 2>&1 |
      grep -E '^(llama_perf_context_print|llama_print_timings): +eval time' |
      sed -E 's/.*, *([0-9.]+) tokens per second.*/\1/' || true
  fi
}

measure() {  # FN CPUS THREADS
  for ((r = 0; r < reps; r++)); do "$1" "$2" "$3"; done | summarize
}

ratio() {  # "MED [..]" "MED [..]"
  awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {
    if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "-" }'
}

llama=""
[[ -n "${LLAMA_BENCH:-}${LLAMA_CLI:-}" ]] && llama=1

echo "model $model; N=$n on CPUs $cpus; $gen tokens decoded, median of $reps runs" >&2
conditions=("alone|$cpus|$n|0" "1 thread|$first|1|0" "2N on N cores|$cpus|$((2 * n))|0"
  "beside $hogs hog(s)|$cpus|$n|1")
declare -a rows=()
base_w=""
base_l=""
for cond in "${conditions[@]}"; do
  IFS='|' read -r name on threads with_hog <<<"$cond"
  echo "  $name: $threads threads on CPUs $on" >&2
  ((with_hog)) && start_hogs
  w="$(measure waste_run "$on" "$threads")"
  l="-"
  [[ -n "$llama" ]] && l="$(measure llama_run "$on" "$threads")"
  ((with_hog)) && stop_hogs
  [[ -z "$base_w" ]] && base_w="$w" && base_l="$l"
  rows+=("$name|$threads|$on|$w|$(ratio "$w" "$base_w")|$l|$(ratio "$l" "$base_l")")
done

printf '\n%-20s %7s %-12s %-26s %8s' condition threads cpus "waste tok/s" "/alone"
[[ -n "$llama" ]] && printf ' %-26s %8s' "llama.cpp tok/s" "/alone"
printf '\n'
for row in "${rows[@]}"; do
  IFS='|' read -r name threads on w wr l lr <<<"$row"
  printf '%-20s %7s %-12s %-26s %8s' "$name" "$threads" "$on" "$w" "$wr"
  [[ -n "$llama" ]] && printf ' %-26s %8s' "$l" "$lr"
  printf '\n'
done
