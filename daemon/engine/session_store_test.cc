// Saved sessions: a conversation kept with keep_session continues after its
// model is unloaded and loaded again (a daemon restart) with the same greedy
// tokens as without the restart, computing only its new tokens; corrupt or
// foreign files are refused; ids that are not plain names are refused; the
// directory stays within its byte limit; sliding-window rings are saved
// and restored.
#include "daemon/engine/session_store.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "daemon/engine/loaded_model.h"
#include "daemon/tools/test_models.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

struct Turn {
  absl::Status status;
  std::string session_id;
  int cached = 0;
  int prompt_tokens = 0;
  std::vector<int32_t> ids;
};

Turn Generate(LoadedModel& model, const std::string& prompt, const std::string& session,
              bool keep) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.set_max_tokens(12);
  request.set_stop_at_eos(false);
  request.set_session_id(session);
  request.set_keep_session(keep);
  Turn turn;
  turn.status = model.Generate(
      request,
      [&](const v1::GenerateEvent& event) {
        if (event.has_started()) {
          turn.session_id = event.started().session_id();
          turn.cached = event.started().cached_prompt_tokens();
          turn.prompt_tokens = event.started().prompt_tokens();
        }
        if (event.has_token() && event.token().id() >= 0) turn.ids.push_back(event.token().id());
        return true;
      },
      nullptr);
  return turn;
}

class SessionStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<LoadedModel> Load(uint64_t max_saved = 0, int64_t context = 256) {
    v1::ModelConfig config;
    config.set_context_length(context);
    config.set_kv_cache_type(v1::KV_CACHE_TYPE_F32);
    config.set_threads(1);
    auto loaded = LoadedModel::Load(storage::Env::Default(), "stories260K", path_, config,
                                    state_dir_, max_saved);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *std::move(loaded) : nullptr;
  }
  std::string SessionFile(const std::string& id) const {
    return SessionStore::DirFor(state_dir_, path_) + "/" + id + ".session";
  }

  std::string path_ = testing::ModelPath("stories260K/stories260K.gguf");
  std::string state_dir_ = testing::TempDir();
};

TEST_F(SessionStoreTest, AKeptSessionContinuesAfterARestartWithTheSameTokens) {
  // Without a restart.
  std::vector<int32_t> expected;
  {
    std::unique_ptr<LoadedModel> model = Load();
    Turn first = Generate(*model, "Lily", "", false);
    ASSERT_TRUE(first.status.ok()) << first.status;
    Turn second = Generate(*model, " went to", first.session_id, false);
    ASSERT_TRUE(second.status.ok()) << second.status;
    expected = second.ids;
  }
  // With one: the model unloads between the turns.
  std::string id;
  int first_tokens = 0;
  {
    std::unique_ptr<LoadedModel> model = Load();
    Turn first = Generate(*model, "Lily", "", /*keep=*/true);
    ASSERT_TRUE(first.status.ok()) << first.status;
    id = first.session_id;
    first_tokens = first.prompt_tokens + static_cast<int>(first.ids.size()) - 1;
  }
  ASSERT_TRUE(std::filesystem::exists(SessionFile(id))) << SessionFile(id);
  std::unique_ptr<LoadedModel> model = Load();
  Turn second = Generate(*model, " went to", id, false);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.session_id, id);
  EXPECT_EQ(second.cached, first_tokens);  // Only the new tokens were computed.
  EXPECT_EQ(second.ids, expected);
}

// Sliding-window layers keep rings (gemma2, window 8, context 1024: rings of
// 520 rows): a conversation longer than a ring continues after a restart
// with the tokens it gives without one, computing only its new tokens.
TEST_F(SessionStoreTest, RingsAreSavedAndRestored) {
  tools::MkModelOptions o;
  o.arch = tools::SyntheticArch::kGemma2;
  o.out = testing::TempDir() + "/ring_gemma2.gguf";
  o.dim = 64;
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 128;
  o.ctx = 1024;
  o.sliding_window = 8;
  o.threads = 1;
  ASSERT_TRUE(tools::testing::WriteModel(o, {}).ok());
  path_ = o.out;
  std::string prompt;
  for (int i = 0; i < 64; ++i) prompt += "the cat sat on the mat. ";
  std::vector<int32_t> expected;
  {
    std::unique_ptr<LoadedModel> model = Load(0, 1024);
    Turn first = Generate(*model, prompt, "", false);
    ASSERT_TRUE(first.status.ok()) << first.status;
    ASSERT_GT(first.prompt_tokens, 600);  // Past a ring.
    Turn second = Generate(*model, " went to", first.session_id, false);
    ASSERT_TRUE(second.status.ok()) << second.status;
    expected = second.ids;
  }
  std::string id;
  int first_tokens = 0;
  {
    std::unique_ptr<LoadedModel> model = Load(0, 1024);
    Turn first = Generate(*model, prompt, "", /*keep=*/true);
    ASSERT_TRUE(first.status.ok()) << first.status;
    id = first.session_id;
    first_tokens = first.prompt_tokens + static_cast<int>(first.ids.size()) - 1;
  }
  std::unique_ptr<LoadedModel> model = Load(0, 1024);
  Turn second = Generate(*model, " went to", id, false);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.cached, first_tokens);
  EXPECT_EQ(second.ids, expected);
}

TEST_F(SessionStoreTest, SaveSessionWritesAnOpenSessionAtOnce) {
  std::unique_ptr<LoadedModel> model = Load();
  Turn first = Generate(*model, "Lily", "", false);
  ASSERT_TRUE(first.status.ok());
  absl::StatusOr<SavedSessionInfo> saved = model->SaveSession(first.session_id);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->path, SessionFile(first.session_id));
  EXPECT_EQ(saved->tokens, first.prompt_tokens + static_cast<int>(first.ids.size()) - 1);
  EXPECT_GT(saved->bytes, 0u);
  EXPECT_EQ(model->SaveSession("s9-unknown").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionStoreTest, ACorruptFileIsRefusedAndTheModelKeepsServing) {
  std::string id;
  {
    std::unique_ptr<LoadedModel> model = Load();
    Turn first = Generate(*model, "Lily", "", /*keep=*/true);
    ASSERT_TRUE(first.status.ok());
    id = first.session_id;
  }
  {
    std::fstream f(SessionFile(id), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-20, std::ios::end);
    f.put('\x5a');
  }
  std::unique_ptr<LoadedModel> model = Load();
  Turn second = Generate(*model, " went", id, false);
  EXPECT_EQ(second.status.code(), absl::StatusCode::kNotFound) << second.status;
  EXPECT_TRUE(absl::StrContains(second.status.message(), "corrupt")) << second.status;
  Turn fresh = Generate(*model, "Lily", "", false);
  EXPECT_TRUE(fresh.status.ok()) << fresh.status;
}

TEST_F(SessionStoreTest, IdsThatAreNotPlainNamesAreRefused) {
  std::unique_ptr<LoadedModel> model = Load();
  for (const std::string& id :
       std::vector<std::string>{"../../etc/passwd", "a/b", std::string("a\0b", 3), "x y"}) {
    Turn turn = Generate(*model, "Lily", id, false);
    EXPECT_EQ(turn.status.code(), absl::StatusCode::kInvalidArgument) << id;
  }
  EXPECT_FALSE(IsValidSessionId(""));
  EXPECT_FALSE(IsValidSessionId(std::string(65, 'a')));
  EXPECT_TRUE(IsValidSessionId("s1-00ff"));
}

TEST_F(SessionStoreTest, SavedSessionsStayWithinTheirByteLimit) {
  std::unique_ptr<LoadedModel> model = Load(/*max_saved=*/1);  // Room for the newest only.
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    Turn turn = Generate(*model, "Lily", "", false);
    ASSERT_TRUE(turn.status.ok());
    ASSERT_TRUE(model->SaveSession(turn.session_id).ok());
    ids.push_back(turn.session_id);
  }
  EXPECT_FALSE(std::filesystem::exists(SessionFile(ids[0])));
  EXPECT_FALSE(std::filesystem::exists(SessionFile(ids[1])));
  EXPECT_TRUE(std::filesystem::exists(SessionFile(ids[2])));
}

}  // namespace
}  // namespace waste::engine
