// moe_bench MODEL.gguf [threads]: on a fully resident MoE model, the
// routed-expert bytes a token touches in a 32-token prefill run as one
// chunked batch versus token at a time, and decode speed.
//   bazel run -c opt //daemon/tools:moe_bench -- /tmp/ds2.gguf 8
// (e.g. after `wasted mkmodel --arch deepseek2 --dim 1024 --layers 8
//  --experts 64 --experts-used 6 --expert-ffn 512 --type q4_0 --out ...`).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "daemon/model/forward.h"
#include "daemon/tools/test_models.h"

namespace waste::model {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: moe_bench MODEL.gguf [threads]\n");
    return 2;
  }
  auto loaded = tools::testing::LoadModel(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const Model& model = *loaded->model;
  const HParams& hp = model.hparams();
  kernels::ThreadPool pool(argc > 2 ? std::atoi(argv[2]) : 8);
  constexpr int kPrompt = 32, kDecode = 64;
  std::vector<int32_t> prompt;
  for (int i = 0; i < kPrompt; ++i) prompt.push_back((i * 37 + 11) % hp.n_vocab);
  std::vector<float> logits(hp.n_vocab);

  Forward chunked(&model, loaded->store.get(), &pool);
  SequenceState a(model, 256, kernels::ops::KvType::kF16);
  double t0 = Now();
  if (!chunked.Run(&a, prompt, logits.data()).ok()) return 1;
  const double prefill_s = Now() - t0;
  const MoeStats pc = chunked.moe_stats();

  Forward single(&model, loaded->store.get(), &pool);
  SequenceState b(model, 256, kernels::ops::KvType::kF16);
  t0 = Now();
  for (int32_t token : prompt) {
    if (!single.Run(&b, {&token, 1}, logits.data()).ok()) return 1;
  }
  const double single_s = Now() - t0;
  const MoeStats ps = single.moe_stats();

  // Greedy decode after the token-at-a-time prefill.
  t0 = Now();
  for (int i = 0; i < kDecode; ++i) {
    int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (!single.Run(&b, {&next, 1}, logits.data()).ok()) return 1;
  }
  const double decode_s = Now() - t0;
  const MoeStats ds = single.moe_stats();

  uint64_t expert_total = 0;
  for (const memory::ChunkSpec& c : model.chunks()) {
    if (c.kind == memory::ChunkKind::kExpert) expert_total += c.tensor_bytes;
  }
  std::printf(
      "model: %s, %lld layers (%lld dense), %lld experts (%lld used), weights %.1f MB, "
      "routed experts %.1f MB, threads %d\n",
      hp.arch_name.c_str(), (long long)hp.n_layer, (long long)hp.moe.n_layer_dense_lead,
      (long long)hp.moe.n_expert, (long long)hp.moe.n_expert_used, model.weight_bytes() / 1e6,
      expert_total / 1e6, pool.num_threads());
  std::printf(
      "prefill %d tokens chunked:       %.1f tok/s, expert bytes/token %.2f MB "
      "(%lld expert chunk acquires)\n",
      kPrompt, kPrompt / prefill_s, pc.expert_bytes / 1e6 / kPrompt, (long long)pc.expert_acquires);
  std::printf(
      "prefill %d tokens one at a time: %.1f tok/s, expert bytes/token %.2f MB "
      "(%lld expert chunk acquires)\n",
      kPrompt, kPrompt / single_s, ps.expert_bytes / 1e6 / kPrompt, (long long)ps.expert_acquires);
  std::printf("decode %d tokens:                %.1f tok/s, expert bytes/token %.2f MB\n", kDecode,
              kDecode / decode_s, (ds.expert_bytes - ps.expert_bytes) / 1e6 / kDecode);
  return 0;
}

}  // namespace
}  // namespace waste::model

int main(int argc, char** argv) { return waste::model::Main(argc, argv); }
