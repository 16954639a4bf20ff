#!/bin/bash
# Lists the functions that the ISA libraries (the files given as
# arguments) keep out of line, and fails when one is not a loop: a per-unit
# helper (a decoder's Load, a transpose, a scale gather) called out of line
# runs a loop several times slower, with its vectors going through memory.
# GCC's inliner decides that per build, so it changed with edits elsewhere
# in a file (resident mixtral decoded 10x slower in one such build, while the
# kernel benchmark measured the same); the helpers are [[gnu::always_inline]]
# and this check keeps them so. Meaningful in optimized builds only (-O0
# inlines nothing else): deploy/test.sh runs it with --config=opt.
set -euo pipefail

# Loop-level functions: a row's or a tile's loop and the dispatch around it,
# the activation quantizers, the kernel tables, static initializers, the
# one-off probe of how to read the codebooks (matvec_avx512_iq.cc).
# (The lambdas of drivers: their per-tile and per-chunk callbacks.)
drivers='Rows[A-Za-z0-9]*|RowQuads|DecodeRowQuads|RunRowTiles|RunGroups|GroupedOrRows'
allowed="^(Dot[A-Za-z0-9]*|$drivers|Quantize[A-Za-z0-9]*|ReorderLane16|[A-Za-z0-9]*Kernels|ReadCodebookForProbe|CodebookReadProbe|_GLOBAL__sub_I_.*|lambda_in_($drivers))\$"

files=()
for f in "$@"; do
  case "$f" in *.a | *.o) files+=("$f") ;; esac
done
if [ ${#files[@]} -eq 0 ]; then
  echo "inlining_check: no files among the arguments: $*" >&2
  exit 1
fi

# Each function's own name: demangled without parameters, anonymous
# namespaces and template arguments dropped, then the last scope component.
# A lambda is "lambda_in_F" (F the function it is in): only a driver's (a
# task's rows, a pool's chunks) may stay out of line, never one inside a
# row's loop (GCC ignores [[gnu::always_inline]] after a lambda's parameters,
# and AVX-512 Q4_K's unit step ran out of line, half as fast, that way).
names=$(for f in "${files[@]}"; do nm --defined-only "$f"; done |
  awk '$2 ~ /^[tTwW]$/ { print $3 }' | c++filt -p |
  sed -e 's/(anonymous namespace):://g' -e ':a' -e 's/<[^<>]*>//g' -e 'ta' |
  awk '{
    lambda = index($0, "::{lambda")
    s = lambda ? substr($0, 1, lambda - 1) : $0
    paren = index(s, "(")
    if (paren) s = substr(s, 1, paren - 1)
    sub(/.* /, "", s)     # The return type.
    sub(/.*::/, "", s)    # The scopes.
    print (lambda ? "lambda_in_" : "") s
  }' | sort | uniq -c)

count=$(echo "$names" | awk '{ n += $1 } END { print n + 0 }')
if [ "$count" -lt 50 ]; then
  echo "inlining_check: only $count functions in ${files[*]}: not the kernel libraries?" >&2
  exit 1
fi

bad=$(echo "$names" | awk -v re="$allowed" '$2 !~ re')
if [ -n "$bad" ]; then
  echo "inlining_check: helpers kept out of line (copies, name):" >&2
  echo "$bad" >&2
  echo "mark them [[gnu::always_inline]], or add a loop-level function to 'allowed'" >&2
  exit 1
fi
echo "inlining_check: $count out-of-line functions in ${#files[@]} files, all loops"
