// The forward pass on the real stories260K model against the golden float64
// reference: logits of the first 8 positions and the greedy continuation.
#include "daemon/model/forward.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/cache/resident_store.h"
#include "gtest/gtest.h"
#include "storage/env.h"
#include "storage/gguf.h"
#include "tests/testdata.h"

namespace waste::model {
namespace {

struct GoldenLogits {
  std::vector<int32_t> inputs;
  std::vector<std::vector<double>> logits;
};

GoldenLogits ReadGoldenLogits(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  GoldenLogits golden;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // pos, input token, then the logits separated by spaces.
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    golden.inputs.push_back(std::stoi(fields[1]));
    std::vector<double> row;
    for (absl::string_view value : absl::StrSplit(fields[2], ' ', absl::SkipWhitespace())) {
      row.push_back(std::stod(std::string(value)));
    }
    golden.logits.push_back(std::move(row));
  }
  return golden;
}

class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::Env* env = storage::Env::Default();
    auto gguf = storage::GgufFile::Open(env, testing::ModelPath("stories260K/stories260K.gguf"));
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    gguf_ = *std::move(gguf);
    auto model = Model::Create(*gguf_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto file = env->NewRandomAccessFile(gguf_->path());
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    auto store = cache::ResidentChunkStore::Load(env, *file_, model_->chunks(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  std::unique_ptr<storage::GgufFile> gguf_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  std::unique_ptr<cache::ResidentChunkStore> store_;
  kernels::ThreadPool pool_{2};
};

TEST_F(StoriesTest, HyperparametersAndChunks) {
  const HParams& hp = model_->hparams();
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(hp.n_ff, 172);
  // Global (output head, norm), the embedding table on its own (the model
  // has an output head), then attention and FFN per layer.
  EXPECT_EQ(model_->chunks().size(), 2u + 2 * 5);
  EXPECT_TRUE(model_->globals().embd_separate());
  EXPECT_EQ(model_->chunks()[model_->globals().embd_chunk].kind, memory::ChunkKind::kEmbeddings);
  EXPECT_EQ(model_->chunks()[model_->globals().embd_chunk].row_bytes,
            model_->globals().token_embd.row_bytes);
}

TEST_F(StoriesTest, LogitsOfFirstEightPositionsMatchGolden) {
  GoldenLogits golden =
      ReadGoldenLogits(testing::ModelPath("stories260K/golden/logits_first8_positions.tsv"));
  ASSERT_EQ(golden.inputs.size(), 8u);
  ASSERT_EQ(golden.logits[7].size(), 512u);
  for (bool batched : {false, true}) {
    SequenceState state(*model_, 64, kernels::ops::KvType::kF32);
    Forward forward(model_.get(), store_.get(), &pool_);
    std::vector<float> logits(8 * 512);
    if (batched) {
      ASSERT_TRUE(forward.Run(&state, golden.inputs, logits.data(), /*all_logits=*/true).ok());
    } else {
      for (int p = 0; p < 8; ++p) {
        ASSERT_TRUE(forward.Run(&state, {&golden.inputs[p], 1}, &logits[p * 512]).ok());
      }
    }
    for (int p = 0; p < 8; ++p) {
      for (int i = 0; i < 512; ++i) {
        double want = golden.logits[p][i];
        EXPECT_NEAR(logits[p * 512 + i], want, 1e-4 * std::max(1.0, std::fabs(want)))
            << "position " << p << " logit " << i << (batched ? " (batched)" : "");
      }
    }
  }
}

TEST_F(StoriesTest, GreedyFromBosMatchesGoldenIds) {
  std::vector<int32_t> golden = testing::StoriesGoldenIds();
  ASSERT_EQ(golden.size(), 256u);
  for (auto kv : {kernels::ops::KvType::kF32, kernels::ops::KvType::kF16}) {
    SequenceState state(*model_, 512, kv);
    Forward forward(model_.get(), store_.get(), &pool_);
    std::vector<float> logits(512);
    int32_t token = 1;  // BOS
    size_t must_match = kv == kernels::ops::KvType::kF32 ? 256 : 114;
    for (size_t i = 0; i < must_match; ++i) {
      ASSERT_TRUE(forward.Run(&state, {&token, 1}, logits.data()).ok());
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ASSERT_EQ(token, golden[i]) << "generated token " << i;
    }
  }
}

TEST_F(StoriesTest, ContextOverflowIsAnErrorAndKeepsTheSequence) {
  SequenceState state(*model_, 4, kernels::ops::KvType::kF16);
  Forward forward(model_.get(), store_.get(), &pool_);
  std::vector<float> logits(512);
  std::vector<int32_t> tokens = {1, 403, 407};
  ASSERT_TRUE(forward.Run(&state, tokens, logits.data()).ok());
  absl::Status status = forward.Run(&state, tokens, logits.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(state.n_past(), 3);
  std::vector<int32_t> bad = {512};
  EXPECT_EQ(forward.Run(&state, bad, logits.data()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace waste::model
