// Sessions stepped together as one batch get the same logits, to the bit, as
// each run alone: four sequences with different prompts join at different
// steps, so most steps mix one sequence's prefill chunk with the others'
// decode tokens (and a few are pure decode steps of four rows). Synthetic
// dense (llama, qwen3), MoE (mixtral, qwen3moe, gpt-oss with a 5-position
// window) and MLA + MoE (deepseek2)
// models; default workspace, router lookahead on, and a small workspace
// whose logits need several head MatMuls. Also: how a step is checked, and
// that the workspace is what WorkspaceBytes says.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/model/forward.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"

namespace waste::model {
namespace {

constexpr auto kKv = kernels::ops::KvType::kF16;
constexpr int64_t kCtx = 64;
constexpr int kDecode = 10;  // Generated tokens fed back per sequence.

tools::MkModelOptions OptionsFor(tools::SyntheticArch arch, const std::string& name) {
  tools::MkModelOptions o;
  o.arch = arch;
  o.out = ::testing::TempDir() + "/batch_test_" + name + ".gguf";
  o.dim = 128;
  o.layers = 3;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 256;
  o.vocab = 320;
  o.ctx = 256;
  o.type = storage::GgmlType::kQ8_0;
  o.threads = 2;
  if (arch == tools::SyntheticArch::kMixtral || arch == tools::SyntheticArch::kQwen3Moe ||
      arch == tools::SyntheticArch::kDeepseek2 || arch == tools::SyntheticArch::kGptOss ||
      arch == tools::SyntheticArch::kGlm4Moe) {
    o.experts = 16;
    o.experts_used = 4;
    o.expert_ffn = 64;
  }
  if (arch == tools::SyntheticArch::kDeepseek2) {
    o.kv_heads = 0;
    o.head_dim = 32;
    o.rope_dim = 16;
    o.kv_lora_rank = 64;
  }
  if (arch == tools::SyntheticArch::kGptOss) {
    o.type = storage::GgmlType::kMXFP4;
    o.sliding_window = 5;  // Sequences at different positions, each its own window.
  }
  if (arch == tools::SyntheticArch::kGemma2 || arch == tools::SyntheticArch::kGemma3) {
    o.sliding_window = 5;
    // gemma3: five windowed layers with their own RoPE tables, then a global one.
    if (arch == tools::SyntheticArch::kGemma3) o.layers = 6;
  }
  return o;
}

// One sequence of the test: its prompt, the step it joins at, its prefill
// chunk, and whether its prefill chunks ask for every token's logits.
struct Script {
  std::vector<int32_t> prompt;
  int start_step;
  int64_t chunk;
  bool all_logits;
};

std::vector<Script> Scripts(int64_t n_vocab) {
  const int64_t lengths[] = {13, 5, 22, 9};
  const int starts[] = {0, 1, 2, 4};
  const int64_t chunks[] = {16, 4, 8, 3};
  std::vector<Script> scripts;
  for (int s = 0; s < 4; ++s) {
    Script script{{}, starts[s], chunks[s], s % 2 == 0};
    for (int64_t i = 0; i < lengths[s]; ++i) {
      script.prompt.push_back(static_cast<int32_t>((i * 37 + 11 * s + 5) % n_vocab));
    }
    scripts.push_back(std::move(script));
  }
  return scripts;
}

int32_t Argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

// A sequence run alone: its tokens (prompt, then kDecode + 1 greedy ones)
// and the logits at every position it was fed.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Trace RunAlone(const Model& model, cache::ChunkStore* store, kernels::ThreadPool* pool,
               const std::vector<int32_t>& prompt) {
  const int64_t n_vocab = model.hparams().n_vocab, n = static_cast<int64_t>(prompt.size());
  Forward forward(&model, store, pool);
  SequenceState state(model, kCtx, kKv);
  Trace t{prompt, std::vector<float>((n + kDecode) * n_vocab)};
  EXPECT_TRUE(
      forward.Run(&state, prompt, t.logits.data(), /*all_logits=*/true, /*prompt=*/true).ok());
  t.tokens.push_back(Argmax(&t.logits[(n - 1) * n_vocab], n_vocab));
  for (int64_t p = n; p < n + kDecode; ++p) {
    float* logits = &t.logits[p * n_vocab];
    EXPECT_TRUE(forward.Run(&state, {&t.tokens[p], 1}, logits).ok());
    t.tokens.push_back(Argmax(logits, n_vocab));
  }
  return t;
}

// Where two rows of logits first differ, or -1.
int64_t FirstDifference(const float* a, const float* b, int64_t n) {
  if (std::memcmp(a, b, n * sizeof(float)) == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
  }
  return -1;
}

struct ModelCase {
  std::string name;
  tools::SyntheticArch arch;
};

class BatchTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    const tools::MkModelOptions o = OptionsFor(GetParam().arch, GetParam().name);
    const absl::Status written = tools::testing::WriteModel(o, {});
    ASSERT_TRUE(written.ok()) << written;
    auto loaded = tools::testing::LoadModel(o.out);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    m_ = *std::move(loaded);
  }
  const Model& model() const { return *m_.model; }
  bool is_moe() const { return model().hparams().moe.n_expert > 0; }

  // Runs the scripts together, one Step per round, and checks every row of
  // logits against the sequences' alone traces, and the greedy tokens.
  void RunTogether(Forward* forward, const std::vector<Script>& scripts,
                   const std::vector<Trace>& alone) {
    const int64_t n_vocab = model().hparams().n_vocab;
    const size_t n_seq = scripts.size();
    std::vector<std::unique_ptr<SequenceState>> states;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<std::vector<float>> logits;
    for (const Script& s : scripts) {
      states.push_back(std::make_unique<SequenceState>(model(), kCtx, kKv));
      tokens.push_back(s.prompt);
      logits.emplace_back(s.chunk * n_vocab);
    }
    int pure_decode_steps = 0;
    for (int round = 0;; ++round) {
      std::vector<SequenceStep> steps;
      std::vector<size_t> who;
      for (size_t i = 0; i < n_seq; ++i) {
        const Script& s = scripts[i];
        const int64_t pos = states[i]->n_past(), len = static_cast<int64_t>(s.prompt.size());
        if (round < s.start_step || pos >= len + kDecode) continue;
        SequenceStep step;
        step.state = states[i].get();
        if (pos < len) {  // A prefill chunk.
          const int64_t n = std::min(s.chunk, len - pos);
          step.tokens = std::span<const int32_t>(s.prompt).subspan(pos, n);
          step.all_logits = s.all_logits;
          step.prompt = true;
          // A caller that needs no logits until the prompt's last passes none.
          step.logits = s.all_logits || pos + n == len ? logits[i].data() : nullptr;
        } else {  // A decode token: the one it generated last.
          step.tokens = std::span<const int32_t>(tokens[i]).subspan(pos, 1);
          step.logits = logits[i].data();
        }
        steps.push_back(step);
        who.push_back(i);
      }
      if (steps.empty()) break;
      int64_t rows = 0, last_rows = 0, all_rows_seqs = 0;
      for (const SequenceStep& step : steps) {
        rows += static_cast<int64_t>(step.tokens.size());
        if (step.logits != nullptr) (step.all_logits ? all_rows_seqs : last_rows) += 1;
      }
      pure_decode_steps += rows == 4 && steps.size() == 4;
      ASSERT_TRUE(forward->Step(steps).ok()) << "round " << round;
      const StepStats& stats = forward->last_step();
      EXPECT_EQ(stats.sequences, static_cast<int64_t>(steps.size()));
      EXPECT_EQ(stats.tokens, rows);
      const int64_t per = forward->options().max_logit_rows;
      EXPECT_EQ(stats.head_matmuls, (last_rows + per - 1) / per + all_rows_seqs);

      for (size_t j = 0; j < steps.size(); ++j) {
        const size_t i = who[j];
        const SequenceStep& step = steps[j];
        const int64_t n = static_cast<int64_t>(step.tokens.size());
        const int64_t pos = states[i]->n_past() - n;  // Of the step's first token.
        ASSERT_EQ(states[i]->n_past(), pos + n);
        if (step.logits == nullptr) continue;
        const int64_t first = step.all_logits ? 0 : n - 1;
        for (int64_t b = first; b < n; ++b) {
          const float* got = step.logits + (b - first) * n_vocab;
          const float* want = &alone[i].logits[(pos + b) * n_vocab];
          const int64_t diff = FirstDifference(got, want, n_vocab);
          ASSERT_EQ(diff, -1) << "sequence " << i << " position " << pos + b << " round " << round
                              << ": logit " << diff << " is " << got[diff] << " together, "
                              << want[diff] << " alone";
        }
        if (pos + n >= static_cast<int64_t>(scripts[i].prompt.size())) {
          const float* last = step.logits + (n - 1 - first) * n_vocab;
          tokens[i].push_back(Argmax(last, n_vocab));
          ASSERT_EQ(tokens[i].back(), alone[i].tokens[pos + n]) << "sequence " << i;
        }
      }
    }
    EXPECT_GT(pure_decode_steps, 0);
    for (size_t i = 0; i < n_seq; ++i) EXPECT_EQ(tokens[i], alone[i].tokens) << "sequence " << i;
  }

  tools::testing::LoadedModel m_;
  kernels::ThreadPool pool_{2};
};

TEST_P(BatchTest, SteppedTogetherEqualsAloneToTheBit) {
  const std::vector<Script> scripts = Scripts(model().hparams().n_vocab);
  std::vector<Trace> alone;
  for (const Script& s : scripts)
    alone.push_back(RunAlone(model(), m_.store.get(), &pool_, s.prompt));

  {
    SCOPED_TRACE("default workspace");
    Forward forward(&model(), m_.store.get(), &pool_);
    RunTogether(&forward, scripts, alone);
  }
  {
    SCOPED_TRACE("32-token steps, 2 logit rows per head MatMul");
    Forward forward(&model(), m_.store.get(), &pool_, {.max_step_tokens = 32, .max_logit_rows = 2});
    RunTogether(&forward, scripts, alone);
  }
  if (is_moe()) {
    SCOPED_TRACE("router lookahead");
    Forward forward(&model(), m_.store.get(), &pool_);
    forward.set_router_lookahead(true);
    RunTogether(&forward, scripts, alone);
    const MoeStats& st = forward.moe_stats();
    // Pure decode steps predict for every row.
    EXPECT_GT(st.lookahead_layers, 4);
    EXPECT_EQ(st.lookahead_routed, st.lookahead_layers * model().hparams().moe.n_expert_used);
    EXPECT_LE(st.lookahead_hits, st.lookahead_routed);
  }
}

// A step of more rows than one product takes (where weights stream, a
// prompt goes in steps of kStreamingStepTokens, each product in pieces of
// kMaxProductRows): every token's logits as in steps of the default size,
// to the bit, and the step after it too.
TEST_P(BatchTest, StepsOfMoreRowsThanOneProductEqualSmallSteps) {
  const int64_t n_vocab = model().hparams().n_vocab;
  std::vector<int32_t> prompt(250);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 5) % 320);
  std::vector<float> want((prompt.size() + 1) * n_vocab), got(want.size());
  for (auto [steps, logits] :
       {std::pair{kDefaultStepTokens, &want}, std::pair{int64_t{256}, &got}}) {
    Forward forward(&model(), m_.store.get(), &pool_, {.max_step_tokens = steps});
    SequenceState state(model(), 256, kKv);
    ASSERT_TRUE(
        forward.Run(&state, prompt, logits->data(), /*all_logits=*/true, /*prompt=*/true).ok());
    EXPECT_EQ(forward.last_step().tokens, steps == 256 ? 250 : 250 % kDefaultStepTokens);
    const int32_t next = 7;
    ASSERT_TRUE(forward.Run(&state, {&next, 1}, logits->data() + prompt.size() * n_vocab).ok());
  }
  for (size_t t = 0; t <= prompt.size(); ++t) {
    ASSERT_EQ(FirstDifference(&want[t * n_vocab], &got[t * n_vocab], n_vocab), -1) << "token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BatchTest,
                         ::testing::Values(ModelCase{"llama", tools::SyntheticArch::kLlama},
                                           ModelCase{"qwen3", tools::SyntheticArch::kQwen3},
                                           ModelCase{"mixtral", tools::SyntheticArch::kMixtral},
                                           ModelCase{"qwen3moe", tools::SyntheticArch::kQwen3Moe},
                                           ModelCase{"deepseek2", tools::SyntheticArch::kDeepseek2},
                                           ModelCase{"gpt_oss", tools::SyntheticArch::kGptOss},
                                           ModelCase{"glm4moe", tools::SyntheticArch::kGlm4Moe},
                                           ModelCase{"gemma2", tools::SyntheticArch::kGemma2},
                                           ModelCase{"gemma3", tools::SyntheticArch::kGemma3}),
                         [](const auto& info) { return info.param.name; });

class StepCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const tools::MkModelOptions o = OptionsFor(tools::SyntheticArch::kLlama, "checks");
    const absl::Status written = tools::testing::WriteModel(o, {});
    ASSERT_TRUE(written.ok()) << written;
    auto loaded = tools::testing::LoadModel(o.out);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    m_ = *std::move(loaded);
  }
  const Model& model() const { return *m_.model; }

  tools::testing::LoadedModel m_;
  kernels::ThreadPool pool_{2};
};

TEST_F(StepCheckTest, BadStepsAreErrorsAndNoSequenceAdvances) {
  Forward forward(&model(), m_.store.get(), &pool_, {.max_step_tokens = 8});
  SequenceState a(model(), kCtx, kKv), b(model(), kCtx, kKv), small(model(), 4, kKv);
  std::vector<float> la(model().hparams().n_vocab), lb(model().hparams().n_vocab);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5}, bad = {1, 320};
  const auto n_pasts = [&] { return std::vector<int64_t>{a.n_past(), b.n_past(), small.n_past()}; };

  // Over max_step_tokens in total, though each sequence alone fits.
  std::vector<SequenceStep> steps = {{&a, five, la.data()}, {&b, five, lb.data()}};
  EXPECT_EQ(forward.Step(steps).code(), absl::StatusCode::kInvalidArgument);
  // One sequence's context is full.
  steps = {{&a, five, la.data()}, {&small, five, nullptr}};
  EXPECT_EQ(forward.Step(steps).code(), absl::StatusCode::kOutOfRange);
  // A token outside the vocabulary.
  steps = {{&a, five, la.data()}, {&b, bad, lb.data()}};
  EXPECT_EQ(forward.Step(steps).code(), absl::StatusCode::kInvalidArgument);
  // The same sequence twice; a sequence without tokens; no sequences.
  steps = {{&a, {&five[0], 1}, la.data()}, {&a, {&five[1], 1}, la.data()}};
  EXPECT_EQ(forward.Step(steps).code(), absl::StatusCode::kInvalidArgument);
  steps = {{&a, five, la.data()}, {&b, {}, lb.data()}};
  EXPECT_EQ(forward.Step(steps).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(forward.Step({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(n_pasts(), (std::vector<int64_t>{0, 0, 0}));

  // Run splits what does not fit one step.
  std::vector<int32_t> twenty(20, 7);
  ASSERT_TRUE(forward.Run(&a, twenty, la.data()).ok());
  EXPECT_EQ(a.n_past(), 20);
  EXPECT_EQ(forward.last_step().tokens, 4);
}

TEST_F(StepCheckTest, WorkspaceIsWhatWorkspaceBytesSaysAndSessionsOnlyTheirCache) {
  const ForwardOptions small{.max_step_tokens = 8, .max_logit_rows = 2};
  for (const ForwardOptions& options : {ForwardOptions{}, small}) {
    Forward forward(&model(), m_.store.get(), &pool_, options);
    EXPECT_EQ(forward.workspace_bytes(), Forward::WorkspaceBytes(model(), options));
  }
  EXPECT_LT(Forward::WorkspaceBytes(model(), small), Forward::WorkspaceBytes(model()));
  // max_logit_rows is capped at the step's rows.
  EXPECT_EQ(Forward::WorkspaceBytes(model(), {.max_step_tokens = 8, .max_logit_rows = 100}),
            Forward::WorkspaceBytes(model(), {.max_step_tokens = 8, .max_logit_rows = 8}));
  SequenceState state(model(), kCtx, kKv);
  EXPECT_EQ(state.bytes(), KvCache::Bytes(model().hparams(), kCtx, kKv));
}

}  // namespace
}  // namespace waste::model
