#!/bin/bash
# The importance matrix's effect, on the quant-conformance fixture (a 1-layer
# synthetic llama, random weights, dim 256; see its PROVENANCE.md): our own
# Q4_K, Q3_K and Q2_K without and with an importance matrix, next to
# llama.cpp's files of the same type made with llama-imatrix's matrix.
# Every file is --pure (every matrix the type, head and embeddings
# included) as the fixture's are; IQ2_XXS uses llama.cpp's default mix.
#
# Measures: perplexity on text.txt at --ctx 64 (a random-weight model: its
# PPL moves up and down with noise and is no quality signal), and the KL
# divergence of each file's next-token distributions from the F32 model's
# on the same positions (the signal), with the share of positions where
# both pick the same top token.
#
# usage: tests/quality/imatrix_effect.sh [OUT_DIR]
#   WASTED=path/to/wasted (default bazel-bin/daemon/wasted; build it with
#   --config=opt), WASTE_TEST_MODELS=path/to/shared/models.
set -euo pipefail
W=${WASTED:-bazel-bin/daemon/wasted}
Q=${WASTE_TEST_MODELS:-../shared/models}/quant-conformance
D=${1:-$(mktemp -d)}
mkdir -p "$D"

"$W" imatrix "$Q/base-f32.gguf" "$Q/text.txt" --ctx 64 -o "$D/ours.imatrix" >/dev/null 2>&1

row() {  # LABEL FILE
  local out ppl kld agree
  out=$("$W" perplexity "$2" "$Q/text.txt" --ctx 64 --kl-base "$Q/base-f32.gguf" 2>/dev/null)
  ppl=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p' <<<"$out")
  kld=$(sed -n 's/^Mean KLD: \([0-9.]*\) +\/- \([0-9.]*\).*/\1 ± \2/p' <<<"$out")
  agree=$(sed -n 's/.*same top token \([0-9.]*%\).*/\1/p' <<<"$out")
  printf "| %-44s | %9s | %-22s | %7s |\n" "$1" "$ppl" "$kld" "$agree"
}

printf "| %-44s | %9s | %-22s | %7s |\n" "file (text.txt, --ctx 64)" "PPL" "KLD vs F32" "top-1"
printf "|%s|%s|%s|%s|\n" "----------------------------------------------" "-----------" \
  "------------------------" "---------"
row "F32 (base-f32.gguf)" "$Q/base-f32.gguf"
for t in Q4_K Q3_K Q2_K; do
  lt=$(tr A-Z a-z <<<"$t")
  "$W" quantize "$Q/base-f32.gguf" "$D/$t-plain.gguf" --type "$lt" --pure >/dev/null
  "$W" quantize "$Q/base-f32.gguf" "$D/$t-ours.gguf" --type "$lt" --pure \
    --imatrix "$D/ours.imatrix" >/dev/null
  "$W" quantize "$Q/base-f32.gguf" "$D/$t-llama-imatrix.gguf" --type "$lt" --pure \
    --imatrix "$Q/imatrix.dat" >/dev/null
  row "$t waste, no imatrix" "$D/$t-plain.gguf"
  row "$t waste, wasted imatrix" "$D/$t-ours.gguf"
  row "$t waste, llama-imatrix's imatrix.dat" "$D/$t-llama-imatrix.gguf"
  row "$t llama.cpp (llama-quantize, imatrix.dat)" "$Q/$t.gguf"
done
"$W" quantize "$Q/base-f32.gguf" "$D/IQ2_XXS-ours.gguf" --type iq2_xxs \
  --imatrix "$D/ours.imatrix" >/dev/null
row "IQ2_XXS mix waste, wasted imatrix" "$D/IQ2_XXS-ours.gguf"
row "IQ2_XXS mix llama.cpp (imatrix.dat)" "$Q/IQ2_XXS.gguf"
