// The forward pass with a VRAM tier on the fake device: the plan puts the
// trunk (and, given room, experts) in VRAM, DeviceWeights uploads those
// chunks, and Forward runs their products on the device while the rest
// streams from the RAM pool. The fake device computes with the CPU kernels,
// so the logits must equal the CPU-only run's to the bit, for dense, MoE and
// MLA models; chunks in VRAM are never acquired from (nor prefetched into)
// the store, and the device holds no more than the VRAM budget.
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "daemon/cache/forwarding_store.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/gpu/fake_device.h"
#include "daemon/memory/plan.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/forward.h"
#include "daemon/model/model_plan.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

constexpr auto kKv = kernels::ops::KvType::kF16;
constexpr int64_t kCtx = 64;
constexpr int kDecode = 8;

// Passes everything to a store and remembers which chunks were asked for.
class RecordingStore : public cache::ForwardingChunkStore {
 public:
  using ForwardingChunkStore::ForwardingChunkStore;
  absl::StatusOr<const uint8_t*> Acquire(memory::ChunkId id) override {
    acquired.insert(id);
    return ForwardingChunkStore::Acquire(id);
  }
  using ForwardingChunkStore::Prefetch;
  void Prefetch(std::span<const memory::ChunkId> ids, size_t needed_now) override {
    prefetched.insert(ids.begin(), ids.end());
    needed_now_past_hint |= needed_now > ids.size();
    ForwardingChunkStore::Prefetch(ids, needed_now);
  }

  std::set<memory::ChunkId> acquired, prefetched;
  // A hint whose needed-now count ran past it (the device's chunks taken out).
  bool needed_now_past_hint = false;
};

// A prompt, then greedy decoding: every position's logits and the tokens.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Trace RunModel(const Model& model, cache::ChunkStore* store, DeviceWeights* device) {
  kernels::ThreadPool pool(2);
  Forward forward(&model, store, &pool);
  forward.set_device_weights(device);
  const int64_t n_vocab = model.hparams().n_vocab;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 11; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 5) % n_vocab));
  const int64_t n = static_cast<int64_t>(prompt.size());
  SequenceState state(model, kCtx, kKv);
  Trace t{prompt, std::vector<float>((n + kDecode) * n_vocab)};
  EXPECT_TRUE(forward.Run(&state, prompt, t.logits.data(), /*all_logits=*/true).ok());
  auto argmax = [&](const float* l) {
    return static_cast<int32_t>(std::max_element(l, l + n_vocab) - l);
  };
  t.tokens.push_back(argmax(&t.logits[(n - 1) * n_vocab]));
  for (int64_t p = n; p < n + kDecode; ++p) {
    float* logits = &t.logits[p * n_vocab];
    absl::Status status = forward.Run(&state, {&t.tokens[p], 1}, logits);
    EXPECT_TRUE(status.ok()) << status;
    t.tokens.push_back(argmax(logits));
  }
  return t;
}

struct Case {
  std::string name;
  tools::SyntheticArch arch;
  storage::GgmlType type;
  bool mla_fused = false;
};

class DeviceForwardTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    tools::MkModelOptions o;
    o.arch = GetParam().arch;
    o.out = ::testing::TempDir() + "/device_forward_" + GetParam().name + ".gguf";
    o.dim = 256;
    o.layers = 4;
    o.heads = 4;
    o.kv_heads = 2;
    o.ffn = 512;
    o.vocab = 320;
    o.ctx = kCtx;
    o.type = GetParam().type;
    o.threads = 2;
    const bool dense =
        o.arch == tools::SyntheticArch::kLlama || o.arch == tools::SyntheticArch::kGemma3;
    if (!dense) {
      o.experts = 8;
      o.experts_used = 2;
      o.expert_ffn = 256;
    }
    if (o.arch == tools::SyntheticArch::kGptOss || o.arch == tools::SyntheticArch::kGemma3) {
      o.sliding_window = 4;
    }
    if (o.arch == tools::SyntheticArch::kDeepseek2) {
      o.kv_heads = 0;
      o.head_dim = 64;
      o.rope_dim = 32;
      o.kv_lora_rank = 128;
      o.mla_fused = GetParam().mla_fused;
    }
    ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
    auto loaded = tools::testing::LoadModel(o.out);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    m_ = *std::move(loaded);
    cpu_ = RunModel(*m_.model, m_.store.get(), nullptr);
  }

  // Plans with `vram_share` of the weights' bytes (plus the activations)
  // as VRAM budget and the RAM tier's floor as RAM budget, then runs with
  // the fake device and the streaming store and compares with the CPU run.
  void RunThreeTiers(double vram_share) {
    const Model& model = *m_.model;
    memory::PlanInput input = PlanInputFor(model, kCtx, kKv);
    memory::PlanOptions options;
    uint64_t weights = 0;
    for (const memory::ChunkSpec& c : model.chunks()) weights += c.slot_bytes;
    options.vram_budget_bytes =
        input.vram_scratch_bytes + static_cast<uint64_t>(vram_share * static_cast<double>(weights));
    const uint64_t floor = memory::ComputePlanSizes(input, options).floor_bytes;
    auto plan = memory::PlanMemory(input, floor, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(plan->Explain());
    ASSERT_FALSE(plan->vram.chunks.empty());

    gpu::FakeDeviceOptions device_options;
    device_options.memory_bytes = options.vram_budget_bytes;  // The budget is all it has.
    gpu::FakeDevice device(device_options);
    auto weights_on_device =
        DeviceWeights::Load(&device, model, *m_.file, plan->in_vram, kMaxProductRows);
    ASSERT_TRUE(weights_on_device.ok()) << weights_on_device.status();
    EXPECT_EQ((*weights_on_device)->stats().chunks, static_cast<int>(plan->vram.chunks.size()));
    EXPECT_EQ((*weights_on_device)->stats().resident_bytes, plan->vram.weight_bytes);

    auto store =
        cache::StreamingChunkStore::Create(storage::Env::Default(), *m_.file, model.chunks(),
                                           cache::StreamingStoreOptions::FromPlan(*plan));
    ASSERT_TRUE(store.ok()) << store.status();
    RecordingStore recording(store->get());
    const Trace gpu = RunModel(model, &recording, weights_on_device->get());

    EXPECT_EQ(gpu.tokens, cpu_.tokens);
    ASSERT_EQ(gpu.logits.size(), cpu_.logits.size());
    EXPECT_EQ(std::memcmp(gpu.logits.data(), cpu_.logits.data(), gpu.logits.size() * 4), 0)
        << "logits differ from the CPU run's";
    for (memory::ChunkId id : plan->vram.chunks) {
      EXPECT_EQ(recording.acquired.count(id), 0u) << model.chunks()[id].name;
      EXPECT_EQ(recording.prefetched.count(id), 0u) << model.chunks()[id].name;
    }
    EXPECT_FALSE(recording.needed_now_past_hint);
    const DeviceWeightsStats& stats = (*weights_on_device)->stats();
    EXPECT_GT(stats.products, 0);
    EXPECT_GT(stats.product_bytes, 0);
    EXPECT_EQ(device.Stats().matmuls, stats.products);
    // Independent products (q, k, v; gate and up; MLA's heads) wait once.
    EXPECT_LT(stats.synchronizations, stats.products);
    EXPECT_LE(static_cast<uint64_t>(device.Stats().peak_allocated_bytes),
              options.vram_budget_bytes);
    EXPECT_EQ(static_cast<uint64_t>(device.Stats().peak_allocated_bytes),
              plan->vram.weight_bytes + plan->vram.scratch_bytes);
    // Tied embeddings live with the head in VRAM and come down a row at a
    // time; a table of its own stays on the host (its rows read there).
    if (plan->vram.global && !model.globals().embd_separate()) {
      EXPECT_GT(stats.row_reads, 0);
    } else {
      EXPECT_EQ(stats.row_reads, 0);
    }
    acquired_ = recording.acquired.size();
  }

  tools::testing::LoadedModel m_;
  Trace cpu_;
  size_t acquired_ = 0;
};

TEST_P(DeviceForwardTest, PartOfTheModelInVramGivesTheCpuLogits) { RunThreeTiers(0.4); }

TEST_P(DeviceForwardTest, AllOfItInVramReadsNothingFromTheStore) {
  RunThreeTiers(1.5);
  // But a fused attn_kv_b's attention, which only the CPU computes
  // (DeviceWeights::Eligible): every layer's, from host memory.
  EXPECT_EQ(acquired_,
            GetParam().mla_fused ? static_cast<size_t>(m_.model->hparams().n_layer) : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Models, DeviceForwardTest,
    ::testing::Values(
        Case{"llama_q8_0", tools::SyntheticArch::kLlama, storage::GgmlType::kQ8_0},
        Case{"llama_q4_k", tools::SyntheticArch::kLlama, storage::GgmlType::kQ4_K},
        Case{"qwen3moe_q8_0", tools::SyntheticArch::kQwen3Moe, storage::GgmlType::kQ8_0},
        // Biases and sinks read from the chunks' host shadows.
        Case{"gpt_oss_q8_0", tools::SyntheticArch::kGptOss, storage::GgmlType::kQ8_0},
        // gpt-oss's own expert type, and the 2- and 3-bit K types of DeepSeek's files.
        Case{"gpt_oss_mxfp4", tools::SyntheticArch::kGptOss, storage::GgmlType::kMXFP4},
        Case{"deepseek2_q2_k", tools::SyntheticArch::kDeepseek2, storage::GgmlType::kQ2_K},
        Case{"qwen3moe_q3_k", tools::SyntheticArch::kQwen3Moe, storage::GgmlType::kQ3_K},
        // The codebook types (DeepSeek's IQ files): their grids on the device.
        Case{"llama_iq2_xs", tools::SyntheticArch::kLlama, storage::GgmlType::kIQ2_XS},
        Case{"qwen3moe_iq1_s", tools::SyntheticArch::kQwen3Moe, storage::GgmlType::kIQ1_S},
        Case{"glm4moe_q8_0", tools::SyntheticArch::kGlm4Moe, storage::GgmlType::kQ8_0},
        // Post-norms and Q/K norms from the host shadows; the tied head on the device.
        Case{"gemma3_q8_0", tools::SyntheticArch::kGemma3, storage::GgmlType::kQ8_0},
        Case{"deepseek2_q6_k", tools::SyntheticArch::kDeepseek2, storage::GgmlType::kQ6_K},
        Case{"deepseek2_fused_q6_k", tools::SyntheticArch::kDeepseek2, storage::GgmlType::kQ6_K,
             /*mla_fused=*/true}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace waste::model
