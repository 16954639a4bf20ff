// A model whose resident chunks the store repacks (InterleaveChunk, as the
// loader does) computes, to the bit, the logits and greedy tokens of the same
// model read as the file has it: synthetic llama models in Q4_0, Q8_0 and Q4_K
// (with matrices that interleave, some with a kRows tail, some too narrow),
// and a deepseek2 model (MLA, a router, shared experts and expert slices,
// which stay as they are).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/cache/streaming_store.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/matvec.h"
#include "daemon/model/forward.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

constexpr int64_t kCtx = 64;
constexpr int kDecode = 8;

struct Case {
  std::string name;
  tools::SyntheticArch arch;
  storage::GgmlType type;
};

tools::MkModelOptions OptionsFor(const Case& c) {
  tools::MkModelOptions o;
  o.arch = c.arch;
  o.out = ::testing::TempDir() + "/repack_test_" + c.name + ".gguf";
  o.dim = 256;
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 768;
  o.vocab = 330;  // Not a multiple of 4: the output head has a kRows tail.
  o.ctx = kCtx;
  o.type = c.type;
  o.threads = 2;
  if (c.arch == tools::SyntheticArch::kDeepseek2) {
    o.kv_heads = 0;
    o.head_dim = 32;
    o.rope_dim = 16;
    o.kv_lora_rank = 64;
    o.experts = 8;
    o.experts_used = 2;
    o.expert_ffn = 256;
  }
  return o;
}

// The prompt's logits at every position, then greedy decoding's.
std::vector<float> RunGreedy(const Model& model, cache::ChunkStore* store,
                             kernels::ThreadPool* pool, std::vector<int32_t>* tokens) {
  const int64_t n_vocab = model.hparams().n_vocab, n = static_cast<int64_t>(tokens->size());
  Forward forward(&model, store, pool);
  SequenceState state(model, kCtx, kernels::ops::KvType::kF16);
  std::vector<float> logits((n + kDecode) * n_vocab);
  EXPECT_TRUE(forward.Run(&state, *tokens, logits.data(), /*all_logits=*/true).ok());
  for (int64_t p = n - 1; p < n - 1 + kDecode; ++p) {
    const float* row = &logits[p * n_vocab];
    tokens->push_back(static_cast<int32_t>(std::max_element(row, row + n_vocab) - row));
    EXPECT_TRUE(forward.Run(&state, {&tokens->back(), 1}, &logits[(p + 1) * n_vocab]).ok());
  }
  return logits;
}

class RepackTest : public ::testing::TestWithParam<Case> {};

TEST_P(RepackTest, ResidentRepackedGivesTheFileLayoutsLogitsToTheBit) {
  const tools::MkModelOptions o = OptionsFor(GetParam());
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto loaded = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Model& model = *loaded->model;
  int interleaving = 0;
  ForEachTensor(model, [&](const TensorRef& t) { interleaving += t.interleaves; });
  const auto type = static_cast<kernels::WeightType>(GetParam().type);
  if (kernels::ResidentLayoutFor(type, model.hparams().n_embd, kernels::DetectIsa()) ==
      kernels::WeightLayout::kRows) {
    // Kept plain on this ISA (interleave_test covers its kernels anyway).
    EXPECT_EQ(interleaving, 0);
    return;
  }
  EXPECT_GE(interleaving, 4);
  EXPECT_FALSE(model.globals().token_embd.interleaves);

  // Every chunk pinned and repacked, as a resident load does.
  cache::StreamingStoreOptions options;
  options.pinned.assign(model.chunks().size(), true);
  options.repack_pinned = [&model](memory::ChunkId id, uint8_t* slot) {
    InterleaveChunk(model, id, slot);
  };
  auto repacked = cache::StreamingChunkStore::Create(storage::Env::Default(), *loaded->file,
                                                     model.chunks(), options);
  ASSERT_TRUE(repacked.ok()) << repacked.status();
  EXPECT_TRUE((*repacked)->Repacked(model.layers()[0].attn_chunk));
  EXPECT_FALSE(loaded->store->Repacked(model.layers()[0].attn_chunk));

  kernels::ThreadPool pool(2);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 11; ++i) prompt.push_back((i * 37 + 5) % 330);
  std::vector<int32_t> want_tokens = prompt, got_tokens = prompt;
  const std::vector<float> want = RunGreedy(model, loaded->store.get(), &pool, &want_tokens);
  const std::vector<float> got = RunGreedy(model, repacked->get(), &pool, &got_tokens);
  EXPECT_EQ(got_tokens, want_tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(
    Models, RepackTest,
    ::testing::Values(Case{"llama_q4_0", tools::SyntheticArch::kLlama, storage::GgmlType::kQ4_0},
                      Case{"llama_q8_0", tools::SyntheticArch::kLlama, storage::GgmlType::kQ8_0},
                      Case{"llama_q4_k", tools::SyntheticArch::kLlama, storage::GgmlType::kQ4_K},
                      Case{"deepseek2_q4_0", tools::SyntheticArch::kDeepseek2,
                           storage::GgmlType::kQ4_0}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace waste::model
