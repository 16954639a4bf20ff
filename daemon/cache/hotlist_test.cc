// The warm hotlist: a round trip preloads the hottest experts into a fresh
// store's free slots; a hotlist of another model version, or a corrupt one,
// is ignored and the store starts cold.
#include "daemon/cache/hotlist.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/mem_env.h"

namespace waste::cache {
namespace {

constexpr uint64_t kChunk = 4096;
constexpr char kModel[] = "/models/moe.gguf";
constexpr char kHotlist[] = "/state/hotlist.txt";

// Global, then per layer (2) an attention chunk, a trunk and 8 experts.
class HotlistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string bytes;
    auto add = [&](std::string name, int layer, ChunkKind kind) {
      ChunkSpec c;
      c.id = static_cast<ChunkId>(chunks_.size());
      c.name = std::move(name);
      c.layer = layer;
      c.kind = kind;
      c.reads.push_back({bytes.size(), kChunk, 0});
      c.slot_bytes = c.tensor_bytes = kChunk;
      bytes.append(kChunk, static_cast<char>(c.id + 1));
      chunks_.push_back(c);
    };
    add("global", -1, ChunkKind::kGlobal);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      add(p + "attn", l, ChunkKind::kAttention);
      add(p + "ffn", l, ChunkKind::kFfn);
      for (int e = 0; e < 8; ++e) add(p + "expert." + std::to_string(e), l, ChunkKind::kExpert);
    }
    env_.SetFile(kModel, bytes);
    auto file = env_.NewRandomAccessFile(kModel);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
    auto id = IdentifyModelFile(&env_, kModel, chunks_);
    ASSERT_TRUE(id.ok()) << id.status();
    identity_ = *id;
  }

  std::unique_ptr<StreamingChunkStore> Make(int slots) {
    StreamingStoreOptions o;
    o.pinned.assign(chunks_.size(), false);
    for (const ChunkSpec& c : chunks_) o.pinned[c.id] = c.kind != ChunkKind::kExpert;
    o.n_slots = slots;
    o.slot_bytes = kChunk;
    o.prefetch_depth = 2;
    o.policy = PolicyKind::kLfuAged;
    o.io.engine = storage::IoEngine::kThreads;
    auto store = StreamingChunkStore::Create(&env_, *file_, chunks_, o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  void Use(StreamingChunkStore* store, ChunkId id, int times) {
    for (int i = 0; i < times; ++i) {
      auto slot = store->Acquire(id);
      ASSERT_TRUE(slot.ok()) << slot.status();
      EXPECT_EQ((*slot)[0], static_cast<uint8_t>(id + 1));
      store->Release(id);
    }
  }

  storage::MemEnv env_;
  std::vector<ChunkSpec> chunks_;
  std::unique_ptr<storage::RandomAccessFile> file_;
  ModelFileIdentity identity_;
};

TEST_F(HotlistTest, RoundTripPreloadsTheHottestExperts) {
  auto first = Make(4);
  // Experts are ids 3..10 (layer 0) and 13..20 (layer 1).
  Use(first.get(), 5, 9);
  Use(first.get(), 15, 7);
  Use(first.get(), 3, 5);
  Use(first.get(), 20, 3);
  Use(first.get(), 8, 1);
  Use(first.get(), 1, 4);  // Pinned attention: never in a hotlist.
  ASSERT_TRUE(SaveHotlist(&env_, kHotlist, identity_, chunks_, first->acquire_counts()).ok());

  auto entries = LoadHotlist(&env_, kHotlist, identity_, chunks_);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[0].chunk, 5);
  EXPECT_EQ((*entries)[0].uses, 9u);
  EXPECT_EQ((*entries)[4].chunk, 8);

  // A restarted daemon: 4 slots take the 4 hottest; their first Acquires hit.
  auto second = Make(4);
  int preloaded = 0;
  auto warm = WarmExpertCache(&env_, kHotlist, identity_, chunks_, second.get(), &preloaded);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(preloaded, 4);
  const ChunkStoreStats before = second->Stats();
  for (ChunkId id : {5, 15, 3, 20}) Use(second.get(), id, 1);
  EXPECT_EQ(second->Stats().misses, before.misses);
  Use(second.get(), 8, 1);
  EXPECT_EQ(second->Stats().misses, before.misses + 1);

  // Counts carry over halved.
  ASSERT_TRUE(
      SaveHotlist(&env_, kHotlist, identity_, chunks_, second->acquire_counts(), *warm).ok());
  entries = LoadHotlist(&env_, kHotlist, identity_, chunks_);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ((*entries)[0].chunk, 5);
  EXPECT_EQ((*entries)[0].uses, 1u + 9 / 2);
}

TEST_F(HotlistTest, AnotherModelVersionIsIgnored) {
  auto store = Make(4);
  Use(store.get(), 5, 2);
  ASSERT_TRUE(SaveHotlist(&env_, kHotlist, identity_, chunks_, store->acquire_counts()).ok());
  ModelFileIdentity other = identity_;
  other.size += 1;
  EXPECT_EQ(LoadHotlist(&env_, kHotlist, other, chunks_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  other = identity_;
  other.layout_hash ^= 1;
  EXPECT_EQ(LoadHotlist(&env_, kHotlist, other, chunks_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto fresh = Make(4);
  int preloaded = -1;
  auto warm = WarmExpertCache(&env_, kHotlist, other, chunks_, fresh.get(), &preloaded);
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(preloaded, 0);
  EXPECT_TRUE(warm->empty());
  EXPECT_EQ(LoadHotlist(&env_, "/state/none", identity_, chunks_).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(HotlistTest, CorruptHotlistIsIgnored) {
  auto store = Make(4);
  Use(store.get(), 5, 2);
  Use(store.get(), 13, 1);
  ASSERT_TRUE(SaveHotlist(&env_, kHotlist, identity_, chunks_, store->acquire_counts()).ok());
  auto text = storage::ReadFileToString(&env_, kHotlist);
  ASSERT_TRUE(text.ok());
  const std::string good = *text;
  auto expect_data_loss = [&](const std::string& bad, const char* what) {
    env_.SetFile(kHotlist, bad);
    EXPECT_EQ(LoadHotlist(&env_, kHotlist, identity_, chunks_).status().code(),
              absl::StatusCode::kDataLoss)
        << what;
    auto fresh = Make(4);
    int preloaded = -1;
    auto warm = WarmExpertCache(&env_, kHotlist, identity_, chunks_, fresh.get(), &preloaded);
    ASSERT_TRUE(warm.ok()) << warm.status();
    EXPECT_EQ(preloaded, 0) << what;
  };
  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 1;  // A digit or letter of the last entry.
  expect_data_loss(flipped, "flipped byte");
  expect_data_loss(good.substr(0, good.size() - 8), "truncated");
  expect_data_loss("waste-expert-hotlist v9\n" + good.substr(good.find('\n') + 1), "version");
  expect_data_loss("", "empty");
}

}  // namespace
}  // namespace waste::cache
