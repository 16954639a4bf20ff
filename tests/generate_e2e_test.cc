// Generation end to end: the real wasted binary serving stories260K, driven
// through the client library and the waste-client CLI, checked against the
// golden greedy output of the trained model.
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/waste_client.h"
#include "gtest/gtest.h"
#include "tests/daemon_harness.h"
#include "tests/subprocess.h"
#include "tests/testdata.h"

namespace waste {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::RunfilePath;

struct Collected {
  absl::Status status;
  std::string text;
  std::vector<int32_t> ids;
  v1::GenerateStarted started;
  v1::GenerateDone done;
  int done_events = 0;
};

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<testing::DaemonHarness>(testing::ModelPath("stories260K"));
    absl::Status serving = harness_->WaitUntilServing();
    ASSERT_TRUE(serving.ok()) << serving;
    socket_ = harness_->socket();
    client_ = &harness_->client();
  }

  Collected Generate(const v1::GenerateRequest& request) {
    Collected c;
    c.status = client_->Generate(request, [&](const v1::GenerateEvent& event) {
      if (event.has_started()) c.started = event.started();
      if (event.has_token()) {
        c.text += event.token().text();
        if (event.token().id() >= 0) c.ids.push_back(event.token().id());
      }
      if (event.has_done()) {
        c.done = event.done();
        ++c.done_events;
      }
      return true;
    });
    return c;
  }

  std::unique_ptr<testing::DaemonHarness> harness_;
  std::string socket_;
  WasteClient* client_ = nullptr;
};

TEST_F(GenerateTest, GreedyFromBosMatchesGoldenThroughTheCli) {
  CommandResult result =
      RunCommand({RunfilePath("client/waste-client"), "--socket", socket_, "generate", "--model",
                  "stories260K", "--temperature", "0", "--max-tokens", "114", ""});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string golden = testing::StoriesGoldenText();
  ASSERT_TRUE(absl::EndsWith(result.out, "\n"));
  std::string text = result.out.substr(0, result.out.size() - 1);
  EXPECT_TRUE(absl::StartsWith(golden, text)) << text;
  EXPECT_GT(text.size(), 250u);
  EXPECT_TRUE(absl::StartsWith(text, "Once upon a time, there was a little girl named Lily."));
}

TEST_F(GenerateTest, LibraryStreamsTheGoldenTokenIdsWithUsage) {
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_max_tokens(256);
  request.set_stop_at_eos(false);
  Collected c = Generate(request);
  ASSERT_TRUE(c.status.ok()) << c.status;
  std::vector<int32_t> golden = testing::StoriesGoldenIds();
  ASSERT_EQ(c.ids.size(), 256u);
  // f16 KV cache (the default): the first 114 tokens are robust to it.
  EXPECT_EQ(std::vector<int32_t>(c.ids.begin(), c.ids.begin() + 114),
            std::vector<int32_t>(golden.begin(), golden.begin() + 114));
  EXPECT_EQ(c.done_events, 1);
  EXPECT_EQ(c.done.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c.done.usage().prompt_tokens(), 1);
  EXPECT_EQ(c.done.usage().completion_tokens(), 256);
  EXPECT_GT(c.done.timings().decode_tokens_per_second(), 0);
  EXPECT_GT(c.done.stats().cache_hits(), 0);
  EXPECT_FALSE(c.started.session_id().empty());

  auto stats = client_->GetStats(v1::GetStatsRequest());
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->models_size(), 1);
  const v1::ModelStats& model = stats->models(0);
  EXPECT_EQ(model.requests(), 1);
  EXPECT_EQ(model.sessions(), 1);
  EXPECT_GE(model.totals().tokens(), 257);
  EXPECT_GT(model.ram_used_bytes(), 0);
  EXPECT_LE(model.ram_used_bytes(), model.ram_budget_bytes());
  EXPECT_EQ(stats->active_requests(), 0);
}

TEST_F(GenerateTest, TokensArriveBeforeGenerationEnds) {
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_max_tokens(500);
  request.set_stop_at_eos(false);
  absl::Time first_token, done;
  v1::GenerateDone done_event;
  int tokens = 0;
  absl::Status status = client_->Generate(request, [&](const v1::GenerateEvent& event) {
    if (event.has_token() && tokens++ == 0) first_token = absl::Now();
    if (event.has_done()) {
      done = absl::Now();
      done_event = event.done();
    }
    return true;
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(tokens, 500);
  // Streamed, not sent at the end: the client holds the first token for
  // most of the time the daemon spent generating the rest (its decode_ms).
  // Events held back until the end would arrive together, a gap near 0.
  const double server_decode_ms = done_event.timings().decode_ms();
  const double client_gap_ms = absl::ToDoubleMilliseconds(done - first_token);
  ASSERT_GT(server_decode_ms, 0);
  EXPECT_GT(client_gap_ms, 0.5 * server_decode_ms)
      << "first token " << client_gap_ms << " ms before the end; the daemon decoded for "
      << server_decode_ms << " ms";
}

TEST_F(GenerateTest, CancellingStopsTheGeneration) {
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_stop_at_eos(false);
  request.set_max_tokens(1500);
  int tokens = 0;
  absl::Status status = client_->Generate(request, [&](const v1::GenerateEvent& event) {
    return !(event.has_token() && ++tokens == 3);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  // The daemon is free again at once for the next request.
  v1::GenerateRequest next;
  next.set_max_tokens(5);
  Collected c = Generate(next);
  EXPECT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.ids.size(), 5u);
}

TEST_F(GenerateTest, SameSeedSameTokens) {
  v1::GenerateRequest request;
  request.set_prompt("Lily");
  request.set_max_tokens(40);
  request.mutable_sampling()->set_temperature(0.9f);
  request.mutable_sampling()->set_top_p(0.95f);
  request.mutable_sampling()->set_seed(42);
  Collected a = Generate(request);
  Collected b = Generate(request);
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.done.seed(), 42u);
  request.mutable_sampling()->set_seed(43);
  EXPECT_NE(Generate(request).ids, a.ids);
}

TEST_F(GenerateTest, StopSequenceEndsAndIsNotSent) {
  v1::GenerateRequest request;
  request.set_max_tokens(200);
  request.add_stop("Lily");
  Collected c = Generate(request);
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.done.finish_reason(), v1::FINISH_REASON_STOP_SEQUENCE);
  EXPECT_EQ(c.done.stop_sequence(), "Lily");
  EXPECT_EQ(c.text, "Once upon a time, there was a little girl named ");
}

TEST_F(GenerateTest, SessionContinuationReusesTheCache) {
  v1::GenerateRequest first;
  first.set_prompt("Once upon a time");
  first.set_max_tokens(10);
  Collected a = Generate(first);
  ASSERT_TRUE(a.status.ok()) << a.status;
  v1::GenerateRequest second;
  second.set_session_id(a.started.session_id());
  second.set_prompt(" and then");
  second.set_max_tokens(5);
  Collected b = Generate(second);
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(b.started.session_id(), a.started.session_id());
  // The earlier prompt and output are already in the KV cache.
  EXPECT_GE(b.started.cached_prompt_tokens(), a.done.usage().prompt_tokens() + 9);
  second.set_session_id("no-such-session");
  EXPECT_EQ(Generate(second).status.code(), absl::StatusCode::kNotFound);
}

TEST_F(GenerateTest, TokenizeAndDetokenize) {
  v1::TokenizeRequest tokenize;
  tokenize.set_model("stories260K");
  tokenize.set_text("Once upon a time");
  auto ids = client_->Tokenize(tokenize);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(std::vector<int32_t>(ids->ids().begin(), ids->ids().end()),
            (std::vector<int32_t>{403, 407, 261, 378}));
  v1::DetokenizeRequest detokenize;
  detokenize.set_model("stories260K");
  std::vector<int32_t> golden = testing::StoriesGoldenIds();
  detokenize.add_ids(1);  // BOS
  for (int32_t id : golden) detokenize.add_ids(id);
  auto text = client_->Detokenize(detokenize);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->text(), testing::StoriesGoldenText());
}

TEST_F(GenerateTest, ClearErrorsForBadRequests) {
  v1::GenerateRequest unknown;
  unknown.set_model("no-such-model");
  absl::Status status = Generate(unknown).status;
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(status.message(), "no-such-model")) << status;

  v1::GenerateRequest bad;
  bad.set_top_logprobs(99);
  EXPECT_EQ(Generate(bad).status.code(), absl::StatusCode::kInvalidArgument);

  CommandResult cli = RunCommand({RunfilePath("client/waste-client"), "--socket", socket_,
                                  "generate", "--model", "nope", "hi"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(cli.err, "no model named 'nope'")) << cli.err;
}

TEST_F(GenerateTest, PlanAndStreamingAtTheFloorGiveTheGoldenTokens) {
  v1::PlanRequest plan_request;
  plan_request.set_model("stories260K");
  plan_request.set_context_length(512);
  auto plan = client_->Plan(plan_request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->plan().fits());
  EXPECT_GT(plan->plan().floor_bytes(), plan->plan().kv_cache_bytes());
  EXPECT_GE(plan->plan().recommended_bytes(), plan->plan().floor_bytes());

  // A budget under the floor is refused at load with the plan's numbers.
  v1::LoadModelRequest load;
  load.set_model("stories260K");
  load.mutable_config()->set_context_length(512);
  load.mutable_config()->set_ram_budget_bytes(plan->plan().floor_bytes() - 1);
  auto refused = client_->LoadModel(load);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "floor")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "wasted plan")) << refused.status();

  // Just over the floor (the f32 KV cache takes 320 KiB more than the f16
  // one planned above) most weights stream through two slots, and the tokens
  // are the same as fully resident.
  load.mutable_config()->set_ram_budget_bytes(plan->plan().floor_bytes() + (320 << 10));
  load.mutable_config()->set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
  auto loaded = client_->LoadModel(load);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_GT(loaded->plan().bytes_read_per_token(), 0);
  v1::GenerateRequest request;
  request.set_model("stories260K");
  request.set_max_tokens(256);
  request.set_stop_at_eos(false);
  Collected c = Generate(request);
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.ids, testing::StoriesGoldenIds());
  EXPECT_GT(c.done.stats().cache_misses(), 0);
  EXPECT_GT(c.done.stats().bytes_read(), 0);
}

}  // namespace
}  // namespace waste
