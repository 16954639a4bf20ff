#!/usr/bin/env bash
# Builds the GGUF parser fuzz target with clang + libFuzzer + ASan/UBSan
# (outside Bazel, whose toolchain is gcc) and runs it.
#
#   tests/fuzz/run_gguf_fuzzer.sh SECONDS [WORK_DIR]
#
# WORK_DIR (default /tmp/gguf_fuzz) receives the binaries, the corpus and any
# crash files; nothing is written inside the repository. The corpus is seeded
# from the .gguf files under $WASTE_TEST_MODELS (default ../shared/models)
# and from small files made by GgufWriter. Exits non-zero when libFuzzer
# finds a crash, leak, timeout or sanitizer report.
set -euo pipefail

seconds="${1:?usage: $0 SECONDS [WORK_DIR]}"
work="${2:-/tmp/gguf_fuzz}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
models="${WASTE_TEST_MODELS:-$repo/../shared/models}"

mkdir -p "$work/corpus" "$work/artifacts"
cd "$repo"

absl_modules="absl_status absl_statusor absl_strings absl_str_format absl_raw_hash_set absl_hash"
absl_cflags="$(pkg-config --cflags $absl_modules)"
absl_libs="$(pkg-config --libs $absl_modules)"
lib_srcs="storage/gguf_reader.cc storage/gguf_value.cc storage/gguf_writer.cc
          storage/ggml_types.cc common/logging.cc"
common=(-std=c++20 -g -O1 -fno-omit-frame-pointer -I. $absl_cflags)

echo "building $work/gguf_fuzzer" >&2
# shellcheck disable=SC2086
clang++ "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  tests/fuzz/gguf_fuzzer.cc $lib_srcs $absl_libs -o "$work/gguf_fuzzer"
# shellcheck disable=SC2086
clang++ "${common[@]}" tests/fuzz/gguf_seed_writer.cc tests/fuzz/gguf_seeds.cc $lib_srcs \
  $absl_libs -o "$work/gguf_seed_writer"

fixtures=()
if [[ -d "$models" ]]; then
  mapfile -t fixtures < <(find "$models" -name '*.gguf' | sort)
  # Real files whole (when they fit max_len) and shrunken copies of them.
  cp -f "${fixtures[@]}" "$work/corpus/"
else
  echo "warning: $models not found; seeding from writer files only" >&2
fi
"$work/gguf_seed_writer" "$work/corpus" "${fixtures[@]}"
echo "corpus: $(ls "$work/corpus" | wc -l) files in $work/corpus" >&2

# Small inputs keep the fuzzer fast (the shrunken seeds carry the real
# files' structure); GGUF_FUZZ_MAX_LEN=4194304 takes the vocab files whole.
# Each parsed value costs ~100 bytes, so 4 GiB RSS is ample.
max_len="${GGUF_FUZZ_MAX_LEN:-65536}"
exec "$work/gguf_fuzzer" "$work/corpus" \
  -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -timeout=30 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1
