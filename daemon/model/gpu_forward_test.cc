// The forward pass on a real GPU against the CPU: stories260K's greedy
// continuation with all of it in VRAM equals the golden tokens (llama.cpp's,
// which the CPU path also gives), and synthetic llama, mixtral, qwen3moe
// and deepseek2 models (several quantization types, all or part of the
// weights in VRAM) give logits within a stated tolerance of the CPU's at
// every position, prefill (batched products) and decode alike. The GPU
// computes with f32 activations where the CPU rounds them to int8, so the
// tolerance is that of reference_test.cc (each path against an f64
// reference) doubled: 2e-4 of the logits' scale for F32 weights, 4e-2 to
// 1e-1 for quantized ones. Prints the largest difference seen per case.
//
// Without a usable CUDA device (or in a build without --config=cuda) every
// test SKIPs and says why; tests/gpu/run_device_check.sh runs it on the
// device machine.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/cache/streaming_store.h"
#include "daemon/memory/plan.h"
#include "daemon/model/device_weights.h"
#include "daemon/model/forward.h"
#include "daemon/model/model_plan.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

constexpr auto kKv = kernels::ops::KvType::kF32;
constexpr int64_t kCtx = 128;

// Opens CUDA device 0 or SKIPs the test. WASTE_TEST_DEVICE=fake runs the
// same checks on the FakeDevice (the test's own logic, on any machine).
std::string DeviceKind() {
  const char* kind = std::getenv("WASTE_TEST_DEVICE");
  return kind != nullptr ? kind : "cuda";
}
#define OPEN_GPU_OR_SKIP(device)                                         \
  auto device##_or = OpenDevice(DeviceKind(), uint64_t{4} << 30);        \
  if (!device##_or.ok()) GTEST_SKIP() << device##_or.status().message(); \
  std::unique_ptr<gpu::Device> device = *std::move(device##_or)

// Every chunk the device computes in VRAM when share >= 1, else that share
// of the weights; the plan's in_vram.
std::vector<bool> VramFor(const Model& model, double share) {
  memory::PlanInput input = PlanInputFor(model, kCtx, kKv);
  memory::PlanOptions options;
  uint64_t weights = 0;
  for (const memory::ChunkSpec& c : model.chunks()) weights += c.slot_bytes;
  options.vram_budget_bytes =
      input.vram_scratch_bytes + static_cast<uint64_t>(share * static_cast<double>(weights)) + 1;
  auto plan = memory::PlanMemory(input, uint64_t{1} << 40, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? plan->in_vram : std::vector<bool>(model.chunks().size(), false);
}

// Logits of every position of `tokens`: a prefill of the first half, then
// the rest one token at a time.
std::vector<float> Logits(const Model& model, cache::ChunkStore* store, DeviceWeights* device,
                          const std::vector<int32_t>& tokens) {
  kernels::ThreadPool pool(4);
  Forward forward(&model, store, &pool);
  forward.set_device_weights(device);
  const int64_t n_vocab = model.hparams().n_vocab;
  const size_t half = tokens.size() / 2;
  std::vector<float> logits(tokens.size() * n_vocab);
  SequenceState state(model, kCtx, kKv);
  EXPECT_TRUE(forward.Run(&state, {tokens.data(), half}, logits.data(), true).ok());
  for (size_t i = half; i < tokens.size(); ++i) {
    EXPECT_TRUE(forward.Run(&state, {&tokens[i], 1}, &logits[i * n_vocab]).ok());
  }
  return logits;
}

TEST(GpuForwardTest, Stories260KGreedyTokensEqualTheGolden) {
  OPEN_GPU_OR_SKIP(device);
  const char* dir = std::getenv("WASTE_TEST_MODELS");
  if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/stories260K")) {
    GTEST_SKIP() << "no stories260K fixture (set WASTE_TEST_MODELS)";
  }
  auto m = tools::testing::LoadModel(::waste::testing::ModelPath("stories260K/stories260K.gguf"));
  ASSERT_TRUE(m.ok()) << m.status();
  const Model& model = *m->model;
  const std::vector<bool> in_vram = VramFor(model, 1.5);
  auto weights = DeviceWeights::Load(device.get(), model, *m->file, in_vram, kMaxProductRows);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::printf("stories260K: %d of %zu chunks in VRAM\n", (*weights)->stats().chunks,
              model.chunks().size());
  kernels::ThreadPool pool(4);
  Forward forward(&model, m->store.get(), &pool);
  forward.set_device_weights(weights->get());
  const std::vector<int32_t> golden = ::waste::testing::StoriesGoldenIds();
  const int64_t n_vocab = model.hparams().n_vocab;
  SequenceState state(model, 512, kKv);
  std::vector<float> logits(n_vocab);
  int32_t token = 1;  // BOS.
  std::vector<int32_t> got;
  for (size_t i = 0; i < 128 && i < golden.size(); ++i) {
    ASSERT_TRUE(forward.Run(&state, {&token, 1}, logits.data()).ok());
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    got.push_back(token);
  }
  EXPECT_EQ(got, std::vector<int32_t>(golden.begin(), golden.begin() + got.size()));
  EXPECT_GT((*weights)->stats().products, 0);
}

struct Case {
  const char* name;
  tools::SyntheticArch arch;
  storage::GgmlType type;
  double tolerance;  // Of the logits' scale.
  double vram_share;
  int64_t experts_used = 2;  // Of 8, for the MoE architectures.
};

class GpuModelsTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuModelsTest, LogitsWithinToleranceOfTheCpu) {
  const Case& c = GetParam();
  OPEN_GPU_OR_SKIP(device);
  tools::MkModelOptions o;
  o.arch = c.arch;
  o.out = ::testing::TempDir() + "/gpu_" + c.name + ".gguf";
  o.dim = 512;
  o.layers = 3;
  o.heads = 8;
  o.kv_heads = 4;
  o.ffn = 1024;
  o.vocab = 320;
  o.ctx = kCtx;
  o.type = c.type;
  o.seed = 7;
  const bool dense =
      c.arch == tools::SyntheticArch::kLlama || c.arch == tools::SyntheticArch::kGemma3;
  if (!dense) {
    o.experts = 8;
    o.experts_used = c.experts_used;
    o.expert_ffn = 256;
  }
  if (c.arch == tools::SyntheticArch::kGemma3) {
    o.layers = 6;  // Five windowed layers, then a global one.
    o.sliding_window = 8;
  }
  if (c.arch == tools::SyntheticArch::kDeepseek2) {
    o.kv_heads = 0;
    o.head_dim = 64;
    o.rope_dim = 32;
    o.kv_lora_rank = 128;
  }
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  auto m = tools::testing::LoadModel(o.out);
  ASSERT_TRUE(m.ok()) << m.status();
  const Model& model = *m->model;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back(static_cast<int32_t>((i * 97 + 13) % 320));
  const std::vector<float> cpu = Logits(model, m->store.get(), nullptr, tokens);

  const std::vector<bool> in_vram = VramFor(model, c.vram_share);
  auto weights = DeviceWeights::Load(device.get(), model, *m->file, in_vram, kMaxProductRows);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const std::vector<float> gpu = Logits(model, m->store.get(), weights->get(), tokens);
  ASSERT_GT((*weights)->stats().products, 0);

  const int64_t n_vocab = model.hparams().n_vocab;
  double worst = 0;
  int argmax_same = 0;
  std::string per_position;
  for (size_t p = 0; p < tokens.size(); ++p) {
    const float* a = &cpu[p * n_vocab];
    const float* b = &gpu[p * n_vocab];
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      scale = std::max(scale, std::fabs(double(a[i])));
      diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    }
    worst = std::max(worst, diff / scale);
    absl::StrAppendFormat(&per_position, " %.0e", diff / scale);
    EXPECT_LE(diff, c.tolerance * scale) << c.name << " position " << p;
    argmax_same += std::max_element(a, a + n_vocab) - a == std::max_element(b, b + n_vocab) - b;
  }
  std::printf(
      "%-16s %d of %zu chunks in VRAM: max |gpu - cpu| = %.2e of the logits' scale "
      "(tolerance %.0e), same argmax at %d of %zu positions\n",
      c.name, (*weights)->stats().chunks, model.chunks().size(), worst, c.tolerance, argmax_same,
      tokens.size());
  std::printf("  by position:%s; %lld products on the device\n", per_position.c_str(),
              static_cast<long long>((*weights)->stats().products));
}

using storage::GgmlType;
using tools::SyntheticArch;

INSTANTIATE_TEST_SUITE_P(
    Models, GpuModelsTest,
    ::testing::Values(
        Case{"llama_f32", SyntheticArch::kLlama, GgmlType::kF32, 2e-4, 1.5},
        Case{"llama_q4_k", SyntheticArch::kLlama, GgmlType::kQ4_K, 1e-1, 1.5},
        Case{"llama_q6_k_part", SyntheticArch::kLlama, GgmlType::kQ6_K, 1e-1, 0.5},
        Case{"mixtral_q8_0", SyntheticArch::kMixtral, GgmlType::kQ8_0, 4e-2, 1.5},
        Case{"qwen3moe_q4_0", SyntheticArch::kQwen3Moe, GgmlType::kQ4_0, 1e-1, 0.5},
        Case{"deepseek2_f32", SyntheticArch::kDeepseek2, GgmlType::kF32, 2e-4, 1.5},
        // Every expert used: with 2 of 8, the CPU's int8 activations flip a
        // near tie in routing at one position in 24 (seen on an H200: 0.6 of
        // the logits' scale at that position, 2e-2 at the others).
        Case{"deepseek2_q8_0", SyntheticArch::kDeepseek2, GgmlType::kQ8_0, 1e-1, 1.5, 8},
        Case{"deepseek2_q4_k_part", SyntheticArch::kDeepseek2, GgmlType::kQ4_K, 1e-1, 0.4, 8},
        // DeepSeek's 2- and 3-bit expert types, gpt-oss's MXFP4, and Gemma 3.
        Case{"deepseek2_q2_k", SyntheticArch::kDeepseek2, GgmlType::kQ2_K, 1.5e-1, 1.5, 8},
        Case{"qwen3moe_q3_k", SyntheticArch::kQwen3Moe, GgmlType::kQ3_K, 1e-1, 1.5, 8},
        Case{"gpt_oss_mxfp4", SyntheticArch::kGptOss, GgmlType::kMXFP4, 1e-1, 1.5, 8},
        Case{"gemma3_q8_0", SyntheticArch::kGemma3, GgmlType::kQ8_0, 1e-1, 1.5},
        // The codebook types, their grids in device memory.
        Case{"deepseek2_iq2_xxs", SyntheticArch::kDeepseek2, GgmlType::kIQ2_XXS, 1.5e-1, 1.5, 8},
        Case{"qwen3moe_iq1_m", SyntheticArch::kQwen3Moe, GgmlType::kIQ1_M, 1.5e-1, 1.5, 8},
        Case{"llama_iq3_s", SyntheticArch::kLlama, GgmlType::kIQ3_S, 1e-1, 1.5}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace waste::model
