#include "daemon/model/fused_keys.h"

#include <algorithm>
#include <vector>

#include "daemon/kernels/dequantize.h"
#include "daemon/kernels/quantize.h"
#include "daemon/model/forward.h"

namespace waste::model::internal {

using kernels::WeightType;

kernels::WeightType FusedKeyType(WeightType file_type, int64_t qk_nope) {
  if (file_type == WeightType::kF32 || file_type == WeightType::kF16 ||
      file_type == WeightType::kBF16) {
    return file_type;
  }
  if (file_type == WeightType::kQ8_0) return WeightType::kF16;
  return qk_nope % kernels::GetWeightTypeInfo(WeightType::kQ8_0).block_elems == 0
             ? WeightType::kQ8_0
             : WeightType::kF32;
}

namespace {

// One head's derived matrix: kv_lora_rank rows of qk_nope.
uint64_t HeadBytes(const MlaParams& mla, WeightType type) {
  return mla.kv_lora_rank * kernels::RowBytes(type, mla.qk_nope);
}

}  // namespace

uint64_t FusedKeyBytes(const Model& model, const LayerTensors& layer) {
  const HParams& hp = model.hparams();
  if (!layer.wkv_b.present) return 0;
  return hp.n_head * HeadBytes(hp.mla, FusedKeyType(layer.wkv_b.type, hp.mla.qk_nope));
}

uint64_t FusedKeyLayerBytes(const Model& model) {
  uint64_t bytes = 0;
  for (const LayerTensors& l : model.layers()) bytes = std::max(bytes, FusedKeyBytes(model, l));
  return bytes;
}

void DeriveFusedKeys(const Model& model, const LayerTensors& layer, const uint8_t* slot,
                     kernels::ThreadPool* pool, uint8_t* out) {
  const MlaParams& mla = model.hparams().mla;
  const TensorRef& kv_b = layer.wkv_b;
  const WeightType type = FusedKeyType(kv_b.type, mla.qk_nope);
  const int64_t nope = mla.qk_nope, lora = mla.kv_lora_rank;
  const uint64_t head_bytes = HeadBytes(mla, type);
  const uint64_t row_bytes = kernels::RowBytes(type, nope);
  pool->ParallelFor(model.hparams().n_head, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(nope * lora), column(nope);
    for (int64_t h = begin; h < end; ++h) {
      // The head's key rows: the first qk_nope of its qk_nope + v_head.
      const uint8_t* first = kv_b.Data(slot) + h * (nope + mla.v_head) * kv_b.row_bytes;
      for (int64_t r = 0; r < nope; ++r) {
        kernels::DequantizeRow(kv_b.type, first + r * kv_b.row_bytes, &rows[r * lora], lora);
      }
      for (int64_t j = 0; j < lora; ++j) {
        for (int64_t r = 0; r < nope; ++r) column[r] = rows[r * lora + j];
        kernels::QuantizeRow(type, column.data(), out + h * head_bytes + j * row_bytes, nope);
      }
    }
  });
}

kernels::WeightView FusedKeyView(const Model& model, const LayerTensors& layer,
                                 const uint8_t* layer_keys, int64_t h) {
  const MlaParams& mla = model.hparams().mla;
  const WeightType type = FusedKeyType(layer.wkv_b.type, mla.qk_nope);
  return kernels::DenseWeightView(type, mla.kv_lora_rank, mla.qk_nope,
                                  layer_keys + h * HeadBytes(mla, type));
}

}  // namespace waste::model::internal

namespace waste::model {

DerivedWeightBytes DerivedWeightBytesPerToken(const Model& model) {
  const HParams& hp = model.hparams();
  DerivedWeightBytes bytes;
  for (const LayerTensors& l : model.layers()) {
    if (!l.wkv_b.present) continue;
    bytes.read += internal::FusedKeyBytes(model, l);
    bytes.replaced += hp.n_head * hp.mla.qk_nope * l.wkv_b.row_bytes;
  }
  return bytes;
}

}  // namespace waste::model
