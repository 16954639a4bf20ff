#!/usr/bin/env bash
# Builds one fuzz target with clang + libFuzzer + ASan/UBSan (outside Bazel,
# whose toolchain is gcc) and fuzzes it for a bounded time.
#
#   tests/fuzz/run_fuzzer.sh NAME SECONDS [WORK_DIR]
#   tests/fuzz/run_fuzzer.sh --list          # the targets
#
# NAME is a target of tests/fuzz/BUILD.bazel without "_fuzzer" (gguf,
# tokenizer, chat_template, config, http_request, reply_stream). Its sources
# are the ones `bazel query` lists for //tests/fuzz:NAME_fuzzer, so the build follows the
# BUILD files; protos among them are compiled with protoc. Objects are
# cached under WORK_DIR (default /tmp/waste-fuzz) and rebuilt when a source
# or header they include changes (make -MMD).
#
# The corpus: tests/fuzz/corpus/NAME/ (committed, read only) plus
# WORK_DIR/NAME/corpus, where libFuzzer keeps what it finds; for gguf also
# the fixtures' .gguf files and small files made by GgufWriter. Fixtures
# come from $WASTE_TEST_MODELS (default ../shared/models). Crashes go to
# WORK_DIR/NAME/artifacts/. Exits non-zero when libFuzzer finds a crash,
# leak, timeout or sanitizer report (UBSan reports are fatal).
#
# Environment: FUZZ_MAX_LEN (default 4096; gguf 65536, GGUF_FUZZ_MAX_LEN
# too), FUZZ_JOBS (compile jobs, default nproc).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
targets=(gguf tokenizer chat_template config http_request reply_stream)
if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
name="${1:?usage: $0 NAME SECONDS [WORK_DIR] (or --list)}"
seconds="${2:?usage: $0 NAME SECONDS [WORK_DIR]}"
work="${3:-/tmp/waste-fuzz}"
models="${WASTE_TEST_MODELS:-$repo/../shared/models}"
if [[ -d "$models" ]]; then models="$(cd "$models" && pwd)"; fi
export WASTE_TEST_MODELS="$models"
cd "$repo"

if ! command -v clang++ > /dev/null; then
  echo "run_fuzzer: clang++ not found; run deploy/setup.sh" >&2
  exit 1
fi

# Repository sources of a Bazel target's transitive deps, as paths.
sources_of() {
  bazel query --noshow_progress "kind('source file', deps($1))" --output=label 2> /dev/null |
    sed -n 's#^//\([^:]*\):\(.*\)$#\1/\2#p; s#^//:\(.*\)$#\1#p' | sed 's#^/##'
}

mapfile -t all < <(sources_of "//tests/fuzz:${name}_fuzzer")
if [[ ${#all[@]} -eq 0 ]]; then
  echo "run_fuzzer: no sources for //tests/fuzz:${name}_fuzzer (known: ${targets[*]})" >&2
  exit 1
fi

absl_modules="absl_status absl_statusor absl_strings absl_str_format absl_synchronization
              absl_time absl_hash absl_raw_hash_set absl_random_random absl_cord"
# shellcheck disable=SC2086
cflags="$(pkg-config --cflags $absl_modules protobuf libpcre2-8 icu-uc liburing nlohmann_json)"
# shellcheck disable=SC2086
libs="$(pkg-config --libs $absl_modules protobuf libpcre2-8 icu-uc liburing) -lboost_system -pthread"

obj="$work/obj"
gen="$work/gen"
mkdir -p "$obj" "$gen"

# Protos among the deps: C++ message code (no gRPC stubs) under $gen.
protos=()
for f in "${all[@]}"; do
  [[ "$f" == *.proto ]] && protos+=("$f")
done
srcs=()
for f in "${all[@]}"; do
  [[ "$f" == *.cc ]] && srcs+=("$f")
done
if [[ ${#protos[@]} -gt 0 ]]; then
  rel=()
  for p in "${protos[@]}"; do rel+=("${p#proto/}"); done
  # Regenerated only when a .proto is newer than its output.
  for p in "${rel[@]}"; do
    if [[ ! -f "$gen/${p%.proto}.pb.cc" || "proto/$p" -nt "$gen/${p%.proto}.pb.cc" ]]; then
      protoc --proto_path=proto --cpp_out="$gen" "${rel[@]}"
      break
    fi
  done
  for p in "${rel[@]}"; do srcs+=("$gen/${p%.proto}.pb.cc"); done
fi

# One Makefile per target: objects shared between targets, rebuilt from
# their dependency files when anything they include changes.
# BOOST_ENABLE_ASSERT_DEBUG_HANDLER: as //daemon/http:boost defines it for
# every Boost user (its handler, boost_assert.cc, is among their sources).
flags="-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=undefined -DBOOST_ENABLE_ASSERT_DEBUG_HANDLER -I$repo -I$gen $cflags"
# Objects made with other flags (an older run_fuzzer.sh) are made again: the
# dependency files only track what the sources include.
if [[ "$(cat "$obj/flags" 2> /dev/null)" != "$flags" ]]; then
  rm -f "$obj"/*.o "$obj"/*.d
  printf '%s' "$flags" > "$obj/flags"
fi
objects=()
rules=""
for src in "${srcs[@]}"; do
  o="$obj/$(echo "$src" | sed "s#^$gen/#gen/#; s#/#__#g").o"
  # The entry point is linked with -fsanitize=fuzzer; the rest only carry
  # libFuzzer's coverage instrumentation.
  extra="-fsanitize=fuzzer-no-link"
  objects+=("$o")
  rules+="$o: $src
	@echo '  CXX $src'
	@clang++ $(echo $flags) $extra -MMD -MP -c $src -o $o
"
done
binary="$work/${name}_fuzzer"
cat > "$work/$name.mk" << EOF
all: $binary
$binary: ${objects[*]}
	@echo '  LINK $binary'
	@clang++ -fsanitize=fuzzer,address,undefined ${objects[*]} $libs -o $binary
$rules
-include $obj/*.d
EOF
echo "run_fuzzer: building $binary (${#srcs[@]} sources)" >&2
make -s -f "$work/$name.mk" -j "${FUZZ_JOBS:-$(nproc)}" all >&2

corpus="$work/$name/corpus"
artifacts="$work/$name/artifacts"
mkdir -p "$corpus" "$artifacts"
dirs=("$corpus")
[[ -d "tests/fuzz/corpus/$name" ]] && dirs+=("tests/fuzz/corpus/$name")
max_len="${FUZZ_MAX_LEN:-4096}"

if [[ "$name" == gguf ]]; then
  # Seeds: the fixtures' GGUF files whole, plus small files made by
  # GgufWriter and shrunken copies of the fixtures (gguf_seed_writer).
  seeds="$work/gguf/seeds"
  mkdir -p "$seeds"
  mapfile -t writer_srcs < <(sources_of //tests/fuzz:gguf_seed_writer | grep '\.cc$')
  clang++ -std=c++20 -O1 -I"$repo" $cflags "${writer_srcs[@]}" $libs \
    -o "$work/gguf_seed_writer"
  fixtures=()
  if [[ -d "$models" ]]; then
    mapfile -t fixtures < <(find "$models" -name '*.gguf' | sort)
    cp -f "${fixtures[@]}" "$seeds/"
  else
    echo "warning: $models not found; seeding from writer files only" >&2
  fi
  "$work/gguf_seed_writer" "$seeds" "${fixtures[@]}"
  dirs+=("$seeds")
  # Small inputs keep the fuzzer fast (the shrunken seeds carry the real
  # files' structure); GGUF_FUZZ_MAX_LEN=4194304 takes the vocab files whole.
  max_len="${GGUF_FUZZ_MAX_LEN:-${FUZZ_MAX_LEN:-65536}}"
fi

options=(-max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -timeout=30
         -artifact_prefix="$artifacts/" -print_final_stats=1)
[[ -f "tests/fuzz/$name.dict" ]] && options+=(-dict="tests/fuzz/$name.dict")
echo "run_fuzzer: $name for ${seconds}s from ${dirs[*]}" >&2
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$binary" "${dirs[@]}" "${options[@]}"
