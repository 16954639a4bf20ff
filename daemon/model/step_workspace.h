// Internal to daemon/model: the buffers one Forward::Step computes in. A
// Forward owns one, allocated at construction for ForwardOptions' sizes, and
// every step reuses it, so the token path allocates nothing. Rows are token
// rows of the step (sequence 0's tokens, then sequence 1's, ...): a buffer
// "per row" holds max_step_tokens of them.
#ifndef WASTE_DAEMON_MODEL_STEP_WORKSPACE_H_
#define WASTE_DAEMON_MODEL_STEP_WORKSPACE_H_

#include <cstdint>
#include <vector>

#include "daemon/cache/chunk_store.h"
#include "daemon/kernels/matvec.h"
#include "daemon/kernels/ops/attention.h"
#include "daemon/model/forward.h"
#include "daemon/model/model.h"
#include "storage/aligned_buffer.h"

namespace waste::model::internal {

// One row's choice at one MoE layer: routed to `expert` with `weight`.
struct ExpertRoute {
  int32_t expert;
  int32_t token;  // Row of the step.
  float weight;
};

// The attention shape of a model's layers (MLA: MQA over the latent row).
kernels::ops::AttentionParams AttentionParamsOf(const HParams& hp);

// ForwardOptions with the logit rows capped at the step's rows; CHECKs the
// ranges (bad options are a caller's bug).
ForwardOptions NormalizedOptions(const ForwardOptions& options);

// See StepWorkspace::expert_out.
inline constexpr int64_t kAnyOrderMaxRows = 16;
// The most experts one RunExpertsTogether computes.
inline constexpr size_t kMaxExpertsTogether = 64;

struct StepWorkspace {
  // `options` must be normalized.
  StepWorkspace(const Model& model, const ForwardOptions& options);
  // What the constructor allocates for these (normalized) options.
  static uint64_t Bytes(const Model& model, const ForwardOptions& options);
  // What this one holds (the same number).
  uint64_t bytes() const;

  // Per row: the residual stream, the normed input of a block (MLA: also
  // the heads' decompressed values), Q, K, V, attention output, a block's
  // output, the FFN's gate and up, and the rope table of the row's position
  // (gemma3: then the sliding-window layers' tables, from rope_table.size() / 2).
  std::vector<float> x, xb, q, k, v, att, tmp, gate, up, rope_table;
  std::vector<float> attn_scratch;  // One sequence's Attention call at a time.
  // MLA, per row: q_a's output, and the per-head [nope | rope] query before
  // absorption.
  std::vector<float> q_lora, mla_q;
  // MLA: one product per head for kernels::MatMulEach.
  std::vector<kernels::OwnProduct> head_products;
  // MoE: router logits/probabilities (per row), one row's selection scores,
  // gathered input rows of one expert, the block's output, the routes of a
  // step (sorted by expert), and the chunks to prefetch: this layer's
  // experts, the next layer's predicted ones, then the next layer's blocks.
  std::vector<float> router, select, moe_x, moe_out;
  std::vector<ExpertRoute> routes;
  std::vector<int32_t> route_ids;
  std::vector<float> route_weights;
  std::vector<memory::ChunkId> expert_chunks;
  // Forward::PrefetchChunks' list less the chunks on the device.
  std::vector<memory::ChunkId> prefetch_ids;
  // Router lookahead, per row: the next layer's router input and the
  // experts it predicts for layer lookahead_layer (-1: none pending);
  // lookahead_union is scratch for the distinct ones.
  std::vector<float> lookahead_x;
  std::vector<int32_t> lookahead_ids, lookahead_union;
  std::vector<float> lookahead_weights;
  int64_t lookahead_layer = -1;
  // A MoE layer computes its experts in the order their reads land when the
  // step routes at most kAnyOrderMaxRows rows (decode): each route's output
  // row waits in expert_out (in routes' order) and the rows are summed in
  // expert-id order afterwards, so the result does not depend on that
  // order. group_start[i] is where expert i of the step starts in routes;
  // group_done marks the ones computed.
  std::vector<float> expert_out;
  std::vector<int32_t> group_start;
  std::vector<uint8_t> group_done;
  // Experts computed together (Forward::RunExpertsTogether): their group
  // indices, and their products (gate and up, then down).
  std::vector<int32_t> experts_together;
  std::vector<kernels::OwnProduct> expert_products;
  // The step's layout: sequence i's rows start at first_row[i];
  // first_row[n_sequences] is the step's row count.
  std::vector<int64_t> first_row;
  // Each step row's product path (SequenceStep::prompt), and those of the
  // head's gathered last rows.
  std::vector<kernels::ProductPath> row_paths;
  std::vector<kernels::ProductPath> head_paths;
  // The head: sequences whose last-token logits are asked, and the staging
  // rows ([max_logit_rows, n_vocab]) their logits come out in.
  std::vector<int32_t> head_sequences;
  std::vector<float> logits;
  // One token's row of an embedding table in its own chunk (read through
  // ChunkStore::ReadPart); empty when the embeddings are tied.
  std::vector<uint8_t> embd_row;
  kernels::Scratch matvec;
  // MLA with a fused attn_kv_b: each layer's derived W_k_b (fused_keys.h),
  // FusedKeyLayerBytes apart, made by the first step that runs the layer.
  storage::AlignedBuffer fused_keys;
  std::vector<uint8_t> fused_keys_ready;  // Per layer.
};

}  // namespace waste::model::internal

#endif  // WASTE_DAEMON_MODEL_STEP_WORKSPACE_H_
