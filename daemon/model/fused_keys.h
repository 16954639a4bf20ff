// Internal to daemon/model: MLA's per-head W_k_b for DeepSeek files
// converted before llama.cpp split attn_kv_b (MlaParams::fused_kv_b).
//
// The absorbed attention (mla.cc) multiplies each head's query by W_k_b,h
// [kv_lora_rank x qk_nope]; a fused attn_kv_b holds that matrix transposed,
// as qk_nope rows of kv_lora_rank, and no dot-product kernel reads a matrix
// by column (dequantizing and summing the rows every token ran at 3-5 ns a
// weight here: 4x slower decode on DeepSeek-V3's attention shape). So the
// first step that runs a layer derives its W_k_b once, into the workspace:
// every head's key rows dequantized, transposed and stored as rows of
// qk_nope in FusedKeyType, which the split form's kernels then read. The
// plan counts those bytes as workspace (for DeepSeek-V3: 61 layers of 128
// heads of 512 x 128, in Q8_0 ~544 MB).
#ifndef WASTE_DAEMON_MODEL_FUSED_KEYS_H_
#define WASTE_DAEMON_MODEL_FUSED_KEYS_H_

#include <cstdint>

#include "daemon/kernels/matvec.h"
#include "daemon/kernels/thread_pool.h"
#include "daemon/model/model.h"

namespace waste::model::internal {

// The derived matrices' type: the file's own for F32/F16/BF16 (the values
// copied exactly); F16 for Q8_0 (rounding Q8_0's values to Q8_0 again
// doubled their error: perplexity 0.18 % from llama.cpp's on a synthetic
// model, 0.08 % in F16); else Q8_0 (whose rounding adds
// ~1/16 of a 6-bit type's error variance, less for fewer bits), or F32
// when qk_nope is not a whole number of Q8_0 blocks.
kernels::WeightType FusedKeyType(kernels::WeightType file_type, int64_t qk_nope);

// Bytes of `layer`'s derived matrices (0 without a fused attn_kv_b), and
// the most of any layer's: each layer's share of the workspace.
uint64_t FusedKeyBytes(const Model& model, const LayerTensors& layer);
uint64_t FusedKeyLayerBytes(const Model& model);

// Derives layer `layer`'s W_k_b,h for every head from its attn_kv_b in
// `slot` (the attention chunk's, kRows layout) into `out`
// (FusedKeyLayerBytes), head after head; heads in parallel on `pool`.
void DeriveFusedKeys(const Model& model, const LayerTensors& layer, const uint8_t* slot,
                     kernels::ThreadPool* pool, uint8_t* out);

// Head h's derived W_k_b in a layer's bytes from DeriveFusedKeys.
kernels::WeightView FusedKeyView(const Model& model, const LayerTensors& layer,
                                 const uint8_t* layer_keys, int64_t h);

}  // namespace waste::model::internal

#endif  // WASTE_DAEMON_MODEL_FUSED_KEYS_H_
