#!/usr/bin/env bash
# The GPU tier's device check (issue 13), run on a machine with an NVIDIA GPU
# from the repository root, with gpu-check/ from build_device_check.sh (it
# builds nothing). Under 8 minutes:
#   1. CudaDevice's kernels against the CPU's dequantization, for every
#      type the device takes, batch 1..64; streams, events, the uploader.
#   2. The forward pass on the GPU against the CPU: stories260K's greedy
#      tokens equal the golden ones; synthetic llama / mixtral / qwen3moe /
#      deepseek2 logits within tolerance; the engine with a VRAM budget
#      gives the CPU's greedy tokens.
#   3. wasted bench on a dense model (llama 7B-shaped, Q4_K, ~3.9 GB) and on
#      a MoE model larger than its VRAM and RAM budgets together (deepseek2,
#      Q4_K, ~30 GB; --vram-budget 6GiB --ram-budget 10GiB), each CPU-only
#      and with the VRAM tier under the same RAM budget: tok/s, bytes per
#      token per tier, share of the HBM / PCIe / RAM / disk bound, speedup.
# Everything is printed and written to $OUT (or ./gpu-check-out).
# WASTE_GPU_CHECK_PARTS picks the parts (default "tests dense moe"; "sanitize" adds
# the kernel tests under compute-sanitizer, "gptoss" a gpt-oss-20b-shaped MXFP4
# model all in RAM vs all in VRAM, "variants" the product kernel's
# speed under each WASTE_CUDA_PREFETCH / WASTE_CUDA_ROWS1 setting), so that
# a short device lease can spend its minutes on the ones still to check.
# A dry run of this script on a machine without a GPU (the tests SKIP):
#   WASTE_GPU_CHECK_DEVICE=fake WASTE_GPU_CHECK_SMALL=1 tests/gpu/run_device_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
gc=gpu-check
out=${OUT:-gpu-check-out}
work=${WASTE_GPU_CHECK_DIR:-/tmp/waste-gpu-check}
mkdir -p "$out" "$work"
log="$out/device_check.txt"
exec > >(tee -a "$log") 2>&1
export WASTE_TEST_MODELS="$PWD/$gc/models"
W="$gc/bin/wasted"
dev=${WASTE_GPU_CHECK_DEVICE:-cuda}
small=${WASTE_GPU_CHECK_SMALL:-}
parts=" ${WASTE_GPU_CHECK_PARTS:-tests dense moe} "
want() { [[ $parts == *" $1 "* ]]; }

step() { echo; echo "=== [$((SECONDS - start)) s] $*"; }
left() { echo $((460 - (SECONDS - start))); }  # Seconds left of the 8 minutes, less a margin.

step "machine"
echo "commit: $(cat $gc/commit 2>/dev/null)"
nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1 || echo "no nvidia-smi"
nproc; free -g | head -2; df -h "$work" | tail -1
# grep reads all of ldd's output: with pipefail, grep -q would stop early and
# ldd's SIGPIPE would fail the test.
if [ -f "$gc/lib.tar.xz" ] && ldd "$gc"/bin/* 2>/dev/null | grep "not found" >/dev/null; then
  echo "unpacking the carried shared libraries"
  mkdir -p "$work/lib" && tar -C "$work" -xJf "$gc/lib.tar.xz"
  export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for b in "$gc"/bin/*; do
  if ldd "$b" | grep "not found" >/dev/null; then echo "MISSING LIBRARIES for $b:"; ldd "$b" | grep "not found"; fi
done

if want tests; then
step "1. CudaDevice kernels, streams, uploader vs the CPU"
timeout 120 "$gc/bin/cuda_device_test"; echo "cuda_device_test exit $?"

step "2a. forward pass on the GPU vs the CPU"
timeout 120 "$gc/bin/gpu_forward_test"; rc=$?; echo "gpu_forward_test exit $rc"
if [ $rc -ne 0 ]; then  # The kernel or the rest? Again with the plain per-element kernel.
  WASTE_CUDA_ELEMENTWISE=1 timeout 120 "$gc/bin/gpu_forward_test"
  echo "gpu_forward_test with WASTE_CUDA_ELEMENTWISE=1 exit $?"
fi
step "2b. engine with a VRAM budget: the CPU's greedy tokens"
timeout 60 "$gc/bin/engine_test" --gtest_filter='*Vram*'; echo "engine_test exit $?"
fi

if want variants; then
step "1v. product kernel settings: GB/s of weights by WASTE_CUDA_PREFETCH and WASTE_CUDA_ROWS1"
for setting in "0 1" "2 1" "4 1" "8 1" "16 1" "0 2" "4 2" "8 2" "0 4" "4 4"; do
  read -r ahead rows1 <<< "$setting"
  echo "--- WASTE_CUDA_PREFETCH=$ahead WASTE_CUDA_ROWS1=$rows1"
  WASTE_CUDA_PREFETCH=$ahead WASTE_CUDA_ROWS1=$rows1 timeout 60 "$gc/bin/cuda_device_test" \
    --gtest_filter='*ProductThroughput/Grouped' | grep -E "GB/s|FAILED|rows? [0-9]"
done
for setting in "4 1" "8 2" "4 4"; do
  read -r ahead rows1 <<< "$setting"
  WASTE_CUDA_PREFETCH=$ahead WASTE_CUDA_ROWS1=$rows1 timeout 60 "$gc/bin/cuda_device_test" \
    --gtest_filter='*EveryType*/Grouped' > "$out/every_type_${ahead}_${rows1}.txt" 2>&1
  echo "EveryTypeMatchesTheDequantizedDot with WASTE_CUDA_PREFETCH=$ahead WASTE_CUDA_ROWS1=$rows1: exit $?"
done
fi

if want sanitize; then
step "1s. the kernels and the uploader under compute-sanitizer memcheck"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$cs" ]; then
  timeout 150 "$cs" --tool memcheck --error-exitcode 9 "$gc/bin/cuda_device_test" \
    --gtest_filter='*EveryType*:*Uploader*:*Refused*'
  echo "compute-sanitizer exit $?"
else
  echo "no compute-sanitizer"
fi
fi

bench() {  # NAME MODEL ARGS...: one bench run, text and JSON.
  local name=$1 model=$2; shift 2
  if [ "$(left)" -lt 40 ]; then echo "SKIPPED $name: out of time"; return; fi
  echo "--- $name: wasted bench $model $*"
  timeout "$(left)" "$W" bench "$model" --threads "$(nproc)" --json "$@" > "$out/$name.json"
  local rc=$?
  echo "exit $rc"
  [ $rc -eq 0 ] && python3 - "$out/$name.json" <<'PY' || cat "$out/$name.json"
import json, sys
j = json.load(open(sys.argv[1]))
keys = ["mode", "decode_tokens_per_second", "prefill_tokens_per_second", "read_bytes_per_token",
        "io_wait_share", "read_busy_gbps", "memory_read_gbps", "device",
        "device_h2d_gbps", "device_product_gbps", "device_synchronizations_per_token",
        "vram_bytes_per_token", "ram_bytes_per_token", "disk_bytes_per_token",
        "planned_bytes_per_token", "device_products_per_token",
        "device_product_seconds_per_token", "bound_seconds_per_token", "peak_rss_bytes"]
for k in keys:
    if k in j: print(f"  {k}: {j[k]}")
tps = j.get("decode_tokens_per_second") or 0
b = j.get("bound_seconds_per_token")
if b and tps:
    t = 1 / tps
    print("  share of the token: " + ", ".join(f"{k} {100 * v / t:.1f}%" for k, v in b.items()))
PY
}
speedup() {  # CPU_JSON GPU_JSON
  python3 - "$out/$1.json" "$out/$2.json" <<'PY' 2>/dev/null || echo "  (no speedup: a run failed)"
import json, sys
c, g = (json.load(open(p))["decode_tokens_per_second"] for p in sys.argv[1:3])
print(f"  decode speedup with the VRAM tier: {g / c:.2f}x ({c:.3f} -> {g:.3f} tok/s; target >= 3x)")
PY
}

if want dense; then
step "3a. dense model: llama 7B-shaped Q4_K"
dense="$work/llama7b_q4k.gguf"
dense_shape=(--dim 4096 --layers 32 --heads 32 --kv-heads 32 --ffn 11008)
[ -n "$small" ] && dense="$work/llama_small.gguf" &&
  dense_shape=(--dim 1024 --layers 8 --heads 8 --kv-heads 8 --ffn 2816)
[ -f "$dense" ] || timeout 120 "$W" mkmodel --arch llama --type q4_k "${dense_shape[@]}" \
  --ctx 4096 --out "$dense" --threads "$(nproc)"
ls -la "$dense"
"$W" plan "$dense" --ram-budget 2GiB --vram-budget 6GiB --ctx 64 --sessions 1 | tail -4
bench dense_cpu "$dense" --ram-budget 2GiB --prompt-tokens 8 --gen-tokens 8
bench dense_gpu "$dense" --ram-budget 2GiB --vram-budget 6GiB --device "$dev" --prompt-tokens 8 \
  --gen-tokens 16
speedup dense_cpu dense_gpu
# WASTE_GPU_CHECK_DENSE_SETTINGS="PREFETCH:ROWS1 ...": the VRAM tier again with
# each product kernel setting.
for setting in ${WASTE_GPU_CHECK_DENSE_SETTINGS:-}; do
  WASTE_CUDA_PREFETCH=${setting%%:*} WASTE_CUDA_ROWS1=${setting##*:} bench "dense_gpu_$setting" \
    "$dense" --ram-budget 2GiB --vram-budget 6GiB --device "$dev" --prompt-tokens 8 --gen-tokens 16
done
fi

if want moe; then
step "3b. MoE larger than VRAM + RAM: deepseek2 Q4_K ~30 GB, 6 GiB VRAM, 10 GiB RAM"
moe="$work/deepseek2_30g_q4k.gguf"
moe_shape=(--dim 4096 --layers 30 --experts 96 --expert-ffn 1536 --ffn 11008)
[ -n "$small" ] && moe="$work/deepseek2_small.gguf" &&
  moe_shape=(--dim 1024 --layers 4 --experts 16 --expert-ffn 512 --ffn 2816)
[ -f "$moe" ] || timeout "$(left)" "$W" mkmodel --arch deepseek2 --type q4_k "${moe_shape[@]}" \
  --heads 32 --head-dim 128 --rope-dim 64 --q-lora-rank 1536 --kv-lora-rank 512 \
  --experts-used 6 --shared-experts 2 --dense-layers 1 --ctx 4096 --out "$moe" \
  --threads "$(nproc)"
ls -la "$moe"
"$W" plan "$moe" --ram-budget 10GiB --vram-budget 6GiB --ctx 64 --sessions 1
bench moe_cpu "$moe" --ram-budget 10GiB --prompt-tokens 8 --gen-tokens 8
bench moe_gpu "$moe" --ram-budget 10GiB --vram-budget 6GiB --device "$dev" --prompt-tokens 8 \
  --gen-tokens 16
speedup moe_cpu moe_gpu
fi

if want gptoss; then
step "3c. gpt-oss-20b-shaped MXFP4 (~12 GB): all in RAM vs all in 16 GiB of VRAM"
oss="$work/gptoss20b_mxfp4.gguf"
oss_shape=(--dim 2880 --layers 24 --heads 64 --head-dim 64 --kv-heads 8 --experts 32
  --experts-used 4 --expert-ffn 2880 --ffn 2880)
[ -n "$small" ] && oss="$work/gptoss_small.gguf" &&
  oss_shape=(--dim 512 --layers 4 --heads 8 --head-dim 64 --kv-heads 2 --experts 8
    --experts-used 2 --expert-ffn 512 --ffn 512)
[ -f "$oss" ] || timeout "$(left)" "$W" mkmodel --arch gpt-oss --type mxfp4 "${oss_shape[@]}" \
  --ctx 4096 --out "$oss" --threads "$(nproc)"
ls -la "$oss"
"$W" plan "$oss" --ram-budget 4GiB --vram-budget 16GiB --ctx 64 --sessions 1 | tail -4
bench oss_cpu "$oss" --ram-budget 24GiB --prompt-tokens 8 --gen-tokens 8
bench oss_gpu "$oss" --ram-budget 4GiB --vram-budget 16GiB --device "$dev" --prompt-tokens 8 \
  --gen-tokens 16
speedup oss_cpu oss_gpu
fi

step "done in $((SECONDS - start)) s; output in $out"
