// The scheduler through LoadedModel, on real weights: concurrent greedy
// requests give the tokens each gives alone (dense and MoE, resident and
// streamed), a step of several sessions reads each streamed chunk once, a
// full queue is refused, cancelling one session mid-prompt or mid-decode
// leaves the others' tokens as they were, and admission waits for a KV
// cache rather than exceed the budget.
#include "daemon/engine/scheduler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "daemon/engine/loaded_model.h"
#include "daemon/engine/planning.h"
#include "daemon/model/forward.h"
#include "daemon/tools/synthetic_model.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

// Collects one request's events; can cancel after its started event or
// after some tokens.
class CollectingSink : public GenerationSink {
 public:
  explicit CollectingSink(int cancel_after_tokens = -1) : cancel_after_(cancel_after_tokens) {}

  bool Send(const v1::GenerateEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (event.has_started()) {
      started_ = true;
      started_event_ = event.started();
    }
    if (event.has_token() && event.token().id() >= 0) ids_.push_back(event.token().id());
    if (event.has_done()) done_ = event.done();
    return true;
  }
  bool Cancelled() const override {
    absl::MutexLock lock(&mu_);
    return cancel_after_ >= 0 && started_ && static_cast<int>(ids_.size()) >= cancel_after_;
  }
  void Finish(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    finished_ = true;
  }
  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&finished_));
    return status_;
  }
  std::vector<int32_t> ids() const {
    absl::MutexLock lock(&mu_);
    return ids_;
  }
  v1::GenerateStarted started() const {
    absl::MutexLock lock(&mu_);
    return started_event_;
  }
  v1::GenerateDone done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 private:
  const int cancel_after_;
  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int32_t> ids_ ABSL_GUARDED_BY(mu_);
  v1::GenerateStarted started_event_ ABSL_GUARDED_BY(mu_);
  v1::GenerateDone done_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

v1::GenerateRequest Greedy(const std::string& prompt, int max_tokens) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.set_max_tokens(max_tokens);
  request.set_stop_at_eos(false);
  return request;
}

const std::vector<std::string>& Prompts() {
  static const auto* prompts = new std::vector<std::string>{
      "Lily", "Once upon a time, there was a little", "The cat sat on the",
      "Tom and his mom went to the park. They saw a big",
      // Over model::kMatrixPromptTokens: where the CPU has a matrix unit,
      // this prompt takes it (Q8_0 weights) beside the others' vector path.
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the sunshine with her dog, and one day they found a shiny red ball"};
  return *prompts;
}

// Each prompt alone, one after another.
std::vector<std::vector<int32_t>> Solo(LoadedModel& model, int max_tokens) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& prompt : Prompts()) {
    CollectingSink sink;
    EXPECT_TRUE(model.Submit(Greedy(prompt, max_tokens), &sink).ok());
    absl::Status status = sink.Wait();
    EXPECT_TRUE(status.ok()) << status;
    out.push_back(sink.ids());
    if (&prompt == &Prompts().back()) {
      // The long prompt's premise: it is long enough for the matrix unit.
      EXPECT_GE(sink.started().prompt_tokens(), model::kMatrixPromptTokens);
    }
  }
  return out;
}

// All prompts submitted at once.
std::vector<std::vector<int32_t>> Together(LoadedModel& model, int max_tokens) {
  std::vector<std::unique_ptr<CollectingSink>> sinks;
  for (const std::string& prompt : Prompts()) {
    sinks.push_back(std::make_unique<CollectingSink>());
    EXPECT_TRUE(model.Submit(Greedy(prompt, max_tokens), sinks.back().get()).ok());
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& sink : sinks) {
    absl::Status status = sink->Wait();
    EXPECT_TRUE(status.ok()) << status;
    out.push_back(sink->ids());
  }
  return out;
}

enum class Budget { kResident, kStreamed, kFloor };

// Loads `path` with f32 KV (so decode rounding does not depend on the
// cache type) and a budget: everything resident, the floor plus room for
// every session's KV cache (weights stream), or the floor alone (one KV
// cache).
std::unique_ptr<LoadedModel> Load(const std::string& path, Budget budget,
                                  v1::ModelConfig config = {}) {
  config.set_context_length(256);
  config.set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
  config.set_threads(2);
  if (!config.has_max_concurrent_requests()) config.set_max_concurrent_requests(4);
  if (budget != Budget::kResident) {
    auto gguf = storage::GgufFile::Open(storage::Env::Default(), path);
    EXPECT_TRUE(gguf.ok()) << gguf.status();
    auto probe = model::Model::Create(**gguf);
    EXPECT_TRUE(probe.ok()) << probe.status();
    auto planned = PlanModel(**probe, config, 256);
    EXPECT_TRUE(planned.ok()) << planned.status();
    const memory::PlanSizes& sizes = planned->plan.sizes;
    const int extra = budget == Budget::kStreamed ? config.max_concurrent_requests() - 1 : 0;
    config.set_ram_budget_bytes(static_cast<int64_t>(sizes.floor_bytes + extra * sizes.kv_bytes));
  }
  auto loaded = LoadedModel::Load(storage::Env::Default(), "test", path, config);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? *std::move(loaded) : nullptr;
}

std::string StoriesPath() { return testing::ModelPath("stories260K/stories260K.gguf"); }

// A small qwen3moe file (16 experts, top-2), written once per test binary.
std::string MoePath() {
  static const std::string* path = [] {
    auto* p = new std::string(testing::TempDir() + "/moe.gguf");
    tools::MkModelOptions options;
    options.arch = tools::SyntheticArch::kQwen3Moe;
    options.out = *p;
    options.dim = 128;
    options.layers = 3;
    options.heads = 4;
    options.kv_heads = 2;
    options.experts = 16;
    options.experts_used = 2;
    options.expert_ffn = 128;
    options.type = storage::GgmlType::kQ8_0;
    options.seed = 5;
    auto written = tools::WriteSyntheticModel(options, storage::Env::Default());
    EXPECT_TRUE(written.ok()) << written.status().ToString();
    return p;
  }();
  return *path;
}

struct Case {
  const char* name;
  bool moe;
  Budget budget;
};

class SameTokensTest : public ::testing::TestWithParam<Case> {};

TEST_P(SameTokensTest, ConcurrentGreedyRequestsGiveTheirSoloTokens) {
  const Case& c = GetParam();
  std::unique_ptr<LoadedModel> model = Load(c.moe ? MoePath() : StoriesPath(), c.budget);
  ASSERT_NE(model, nullptr);
  if (c.budget == Budget::kStreamed) {
    ASSERT_FALSE(model->Plan().bytes_read_per_token() == 0) << "weights should stream";
    ASSERT_EQ(model->Plan().concurrent_sessions(), 4);
  }
  const std::vector<std::vector<int32_t>> solo = Solo(*model, 40);
  const std::vector<std::vector<int32_t>> together = Together(*model, 40);
  ASSERT_EQ(solo.size(), together.size());
  for (size_t i = 0; i < solo.size(); ++i) {
    ASSERT_EQ(solo[i].size(), 40u);
    EXPECT_EQ(together[i], solo[i]) << "prompt " << i << ": " << Prompts()[i];
  }
  // They really ran together: some steps carried several sessions.
  EXPECT_GE(model->Stats().max_batch_size(), 3);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, SameTokensTest,
                         ::testing::Values(Case{"DenseResident", false, Budget::kResident},
                                           Case{"DenseStreamed", false, Budget::kStreamed},
                                           Case{"MoeResident", true, Budget::kResident},
                                           Case{"MoeStreamed", true, Budget::kStreamed}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(SchedulerTest, AStepReadsEachStreamedChunkOnceForAllItsSessions) {
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kStreamed);
  ASSERT_NE(model, nullptr);
  const int64_t per_token = model->Plan().bytes_read_per_token();
  ASSERT_GT(per_token, 0);
  constexpr int kTokens = 30;

  // One after another: every token of every request reads the streamed
  // weights.
  int64_t bytes = model->Stats().totals().bytes_read();
  for (int i = 0; i < 4; ++i) {
    CollectingSink sink;
    ASSERT_TRUE(model->Submit(Greedy("", kTokens), &sink).ok());
    ASSERT_TRUE(sink.Wait().ok());
  }
  const int64_t sequential = model->Stats().totals().bytes_read() - bytes;

  // Together: each step reads them once for the four.
  bytes = model->Stats().totals().bytes_read();
  const int64_t steps_before = model->Stats().steps();
  std::vector<std::unique_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_unique<CollectingSink>());
    ASSERT_TRUE(model->Submit(Greedy("", kTokens), sinks.back().get()).ok());
  }
  double share = 0;
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->Wait().ok());
    share += static_cast<double>(sink->done().stats().bytes_read());
  }
  const v1::ModelStats stats = model->Stats();
  const int64_t together = stats.totals().bytes_read() - bytes;
  const int64_t steps = stats.steps() - steps_before;
  // 30 tokens each: 1 prompt step + 29 decode steps when all four joined
  // the first step; a late joiner adds a few.
  EXPECT_LE(steps, kTokens + 6);
  EXPECT_LE(together, (steps + 1) * per_token);
  EXPECT_LT(together, sequential / 3) << "together " << together << ", one by one " << sequential;
  // The per-request shares add up to what the steps read.
  EXPECT_NEAR(share, static_cast<double>(together), 0.01 * static_cast<double>(together) + 16);
  EXPECT_GT(sinks[0]->done().mean_batch_size(), 2.0);
}

TEST(SchedulerTest, AFullQueueIsRefusedAtOnceWithTheNumbers) {
  v1::ModelConfig config;
  config.set_max_concurrent_requests(1);
  config.set_max_queued_requests(1);
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kResident, config);
  ASSERT_NE(model, nullptr);
  CollectingSink first(/*cancel_after_tokens=*/200), second;
  ASSERT_TRUE(model->Submit(Greedy("", 250), &first).ok());
  ASSERT_TRUE(model->Submit(Greedy("", 5), &second).ok());
  CollectingSink third;
  absl::Status refused = model->Submit(Greedy("", 5), &third);
  if (refused.ok()) third.Wait().IgnoreError();  // The sink must outlive its request.
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "max_queued_requests 1")) << refused;
  EXPECT_EQ(first.Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(second.Wait().ok());
  EXPECT_EQ(second.ids().size(), 5u);
}

TEST(SchedulerTest, CancelAllEndsRunningAndQueuedRequests) {
  v1::ModelConfig config;
  config.set_max_concurrent_requests(1);
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kResident, config);
  ASSERT_NE(model, nullptr);
  CollectingSink running, queued;
  ASSERT_TRUE(model->Submit(Greedy("", 250), &running).ok());
  ASSERT_TRUE(model->Submit(Greedy("", 250), &queued).ok());
  model->CancelAll("forced unload");
  const absl::Status a = running.Wait(), b = queued.Wait();
  EXPECT_EQ(a.code(), absl::StatusCode::kCancelled) << a;
  EXPECT_EQ(b.code(), absl::StatusCode::kCancelled) << b;
  EXPECT_TRUE(absl::StrContains(b.message(), "forced unload")) << b;
  EXPECT_LT(running.ids().size(), 250u);
  EXPECT_EQ(model->Stats().running_requests() + model->Stats().queued_requests(), 0);
}

TEST(SchedulerTest, CancellingOneSessionMidPromptOrMidDecodeLeavesTheOthersUnchanged) {
  v1::ModelConfig config;
  config.set_prefill_chunk(4);  // A long prompt takes many steps.
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kStreamed, config);
  ASSERT_NE(model, nullptr);
  const std::vector<std::vector<int32_t>> solo = Solo(*model, 40);

  std::string long_prompt;
  for (int i = 0; i < 12; ++i) long_prompt += "Once upon a time, there was a little girl. ";
  CollectingSink mid_prompt(/*cancel_after_tokens=*/0), mid_decode(/*cancel_after_tokens=*/3);
  CollectingSink a, b;
  ASSERT_TRUE(model->Submit(Greedy(long_prompt, 40), &mid_prompt).ok());
  ASSERT_TRUE(model->Submit(Greedy(Prompts()[0], 40), &a).ok());
  ASSERT_TRUE(model->Submit(Greedy(Prompts()[1], 40), &mid_decode).ok());
  ASSERT_TRUE(model->Submit(Greedy(Prompts()[3], 40), &b).ok());

  EXPECT_EQ(mid_prompt.Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(mid_prompt.ids().empty());
  EXPECT_EQ(mid_decode.Wait().code(), absl::StatusCode::kCancelled);
  const std::vector<int32_t> cancelled_ids = mid_decode.ids();
  ASSERT_GE(cancelled_ids.size(), 3u);
  EXPECT_EQ(std::vector<int32_t>(cancelled_ids.begin(), cancelled_ids.begin() + 3),
            std::vector<int32_t>(solo[1].begin(), solo[1].begin() + 3));
  ASSERT_TRUE(a.Wait().ok());
  ASSERT_TRUE(b.Wait().ok());
  EXPECT_EQ(a.ids(), solo[0]);
  EXPECT_EQ(b.ids(), solo[3]);
  const v1::ModelStats stats = model->Stats();
  EXPECT_EQ(stats.running_requests(), 0);
  EXPECT_EQ(stats.queued_requests(), 0);
}

TEST(SchedulerTest, AdmissionWaitsForAKvCacheRatherThanExceedTheBudget) {
  // At the floor the budget holds one KV cache although four are asked for.
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kFloor);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->Plan().concurrent_sessions(), 1);
  const std::vector<std::vector<int32_t>> solo = Solo(*model, 20);
  const std::vector<std::vector<int32_t>> together = Together(*model, 20);
  EXPECT_EQ(together, solo);
  const v1::ModelStats stats = model->Stats();
  EXPECT_EQ(stats.session_capacity(), 1);
  EXPECT_EQ(stats.max_batch_size(), 1);
  EXPECT_EQ(stats.sessions(), 1);
  EXPECT_LE(stats.ram_used_bytes(), stats.ram_budget_bytes());
}

TEST(SchedulerTest, AContinuedSessionWaitsForItsRunningRequest) {
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kResident);
  ASSERT_NE(model, nullptr);
  CollectingSink first;
  ASSERT_TRUE(model->Submit(Greedy("Lily", 10), &first).ok());
  ASSERT_TRUE(first.Wait().ok());
  const std::string session = first.started().session_id();
  ASSERT_FALSE(session.empty());
  // Two follow-ups of one session submitted at once run one after the
  // other, each continuing what the session holds by then.
  v1::GenerateRequest more = Greedy(" went", 5);
  more.set_session_id(session);
  CollectingSink second, third;
  ASSERT_TRUE(model->Submit(more, &second).ok());
  ASSERT_TRUE(model->Submit(more, &third).ok());
  ASSERT_TRUE(second.Wait().ok());
  ASSERT_TRUE(third.Wait().ok());
  EXPECT_EQ(third.started().session_id(), session);
  EXPECT_GE(third.started().cached_prompt_tokens(), second.started().prompt_tokens());
  EXPECT_GT(third.started().prompt_tokens(), second.started().prompt_tokens() + 5);

  more.set_session_id("s0-unknown");
  CollectingSink missing;
  ASSERT_TRUE(model->Submit(more, &missing).ok());
  EXPECT_EQ(missing.Wait().code(), absl::StatusCode::kNotFound);
}

// cache_prompt: a request without a session starts from the KV cache an
// earlier such request left, when their tokens share a prefix, and gives
// the tokens it gives from a cold start; the session it took over is gone
// under its old id. Without cache_prompt, or with keep_session, nothing is
// shared.
TEST(SchedulerTest, APromptSharingAPrefixStartsFromAnEarlierRequestsKvCache) {
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kResident);
  ASSERT_NE(model, nullptr);
  auto run = [&model](const std::string& prompt, bool cache_prompt, bool keep = false) {
    v1::GenerateRequest request = Greedy(prompt, 12);
    request.set_cache_prompt(cache_prompt);
    request.set_keep_session(keep);
    auto sink = std::make_unique<CollectingSink>();
    EXPECT_TRUE(model->Submit(request, sink.get()).ok());
    EXPECT_TRUE(sink->Wait().ok());
    return sink;
  };
  const std::string story = "Once upon a time, there was a little girl named Lily. She loved";
  const std::string longer = story + " to play with her ball in the park";
  const auto cold = run(longer, false);
  EXPECT_EQ(cold->started().cached_prompt_tokens(), 0);

  const auto first = run(story, true);
  EXPECT_EQ(first->started().cached_prompt_tokens(), 0);  // Nothing shared it yet.
  const auto warm = run(longer, true);
  // At least the story's tokens (less the last, whose logits are recomputed).
  EXPECT_GE(warm->started().cached_prompt_tokens(), first->started().prompt_tokens() - 1);
  EXPECT_LT(warm->started().cached_prompt_tokens(), warm->started().prompt_tokens());
  EXPECT_EQ(warm->ids(), cold->ids());
  EXPECT_NE(warm->started().session_id(), first->started().session_id());
  v1::GenerateRequest follow = Greedy(" went", 4);
  follow.set_session_id(first->started().session_id());
  CollectingSink gone;
  ASSERT_TRUE(model->Submit(follow, &gone).ok());
  EXPECT_EQ(gone.Wait().code(), absl::StatusCode::kNotFound);

  // The same prompt again: all of it but the last token.
  const auto again = run(longer, true);
  EXPECT_EQ(again->started().cached_prompt_tokens(), again->started().prompt_tokens() - 1);
  EXPECT_EQ(again->ids(), cold->ids());
  // Not asked for, or a kept session: nothing taken, and nothing lent.
  EXPECT_EQ(run(longer, false)->started().cached_prompt_tokens(), 0);
  const std::string park = "Tom and his mom went to the park. They saw a big";
  const auto kept = run(park, true, /*keep=*/true);
  EXPECT_EQ(kept->started().cached_prompt_tokens(), 0);
  // (The table is full by now: a new cache would drop one, so the BOS token
  // alone is worth taking one over; the kept session's prefix is not lent.)
  EXPECT_LE(run(park, true)->started().cached_prompt_tokens(), 1);
}

// While there is room for a new KV cache, a prefix of half the prompt or less
// (here the BOS token) takes none over.
TEST(SchedulerTest, AShortSharedPrefixLeavesTheCacheToItsSession) {
  std::unique_ptr<LoadedModel> model = Load(StoriesPath(), Budget::kResident);
  ASSERT_NE(model, nullptr);
  v1::GenerateRequest request = Greedy("Once upon a time, there was a little girl", 4);
  request.set_cache_prompt(true);
  CollectingSink first, second;
  ASSERT_TRUE(model->Submit(request, &first).ok());
  ASSERT_TRUE(first.Wait().ok());
  request.set_prompt("Lily");
  ASSERT_TRUE(model->Submit(request, &second).ok());
  ASSERT_TRUE(second.Wait().ok());
  EXPECT_EQ(second.started().cached_prompt_tokens(), 0);
  // The first request's session is still there to continue.
  v1::GenerateRequest follow = Greedy(" named", 4);
  follow.set_session_id(first.started().session_id());
  CollectingSink third;
  ASSERT_TRUE(model->Submit(follow, &third).ok());
  ASSERT_TRUE(third.Wait().ok());
  EXPECT_GT(third.started().cached_prompt_tokens(), first.started().prompt_tokens());
}

}  // namespace
}  // namespace waste::engine
