#include "daemon/cache/streaming_store.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/fault_env.h"
#include "storage/mem_env.h"
#include "storage/posix_env.h"

namespace waste::cache {
namespace {

constexpr uint64_t kChunk = 3 * 4096;
constexpr char kPath[] = "/model";

// A file of `n` chunks of kChunk bytes (attention chunks `attn_bytes`);
// chunk i is filled with byte i + 1. Chunk 0 is global, then alternating
// attention/FFN per layer.
class StreamingStoreTest : public ::testing::Test {
 protected:
  void Build(int n, uint64_t attn_bytes = kChunk) {
    std::string bytes;
    chunks_.clear();
    for (int i = 0; i < n; ++i) {
      const uint64_t size = i % 2 ? attn_bytes : kChunk;
      const uint64_t offset = bytes.size();
      bytes.append(size, static_cast<char>(i + 1));
      ChunkSpec c;
      c.id = i;
      c.name =
          i == 0 ? "global" : "blk." + std::to_string((i - 1) / 2) + (i % 2 ? ".attn" : ".ffn");
      c.layer = i == 0 ? -1 : (i - 1) / 2;
      c.kind = i == 0 ? ChunkKind::kGlobal : (i % 2 ? ChunkKind::kAttention : ChunkKind::kFfn);
      // Two reads per chunk, so a chunk is several pieces in flight.
      c.reads.push_back({offset, 4096, 0});
      c.reads.push_back({offset + 4096, size - 4096, 4096});
      c.slot_bytes = c.tensor_bytes = size;
      chunks_.push_back(c);
    }
    mem_.SetFile(kPath, bytes);
    auto file = fault_.NewRandomAccessFile(kPath);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  StreamingStoreOptions Options(int slots, int depth, PolicyKind policy) {
    StreamingStoreOptions o;
    o.pinned.assign(chunks_.size(), false);
    o.pinned[0] = true;
    o.n_slots = slots;
    o.slot_bytes = kChunk;
    o.prefetch_depth = depth;
    o.policy = policy;
    o.max_read = 4096;
    o.io.engine = storage::IoEngine::kThreads;
    for (ChunkId id = 1; id < static_cast<ChunkId>(chunks_.size()); ++id) {
      o.access_order.push_back(id);
    }
    return o;
  }

  std::unique_ptr<StreamingChunkStore> Make(const StreamingStoreOptions& options) {
    auto store = StreamingChunkStore::Create(&fault_, *file_, chunks_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Seven chunks of which 3..6 are "experts" (off the access order); 5
  // slots, read-ahead depth 4.
  std::unique_ptr<StreamingChunkStore> MakeWithExperts(uint64_t guess_read_bytes = 1 << 20) {
    Build(7);
    StreamingStoreOptions o = Options(/*slots=*/5, /*depth=*/4, PolicyKind::kLru);
    o.access_order = {1, 2};
    o.guess_read_bytes = guess_read_bytes;
    return Make(o);
  }

  // Acquires `id`, checks every byte, releases it.
  void Use(StreamingChunkStore* store, ChunkId id, bool prefetch = true) {
    auto slot = store->Acquire(id);
    ASSERT_TRUE(slot.ok()) << slot.status();
    if (prefetch) store->Prefetch({});
    for (uint64_t b = 0; b < chunks_[id].slot_bytes; ++b) {
      ASSERT_EQ((*slot)[b], static_cast<uint8_t>(id + 1)) << "chunk " << id << " byte " << b;
    }
    store->Release(id);
  }

  storage::MemEnv mem_;
  storage::FaultEnv fault_{&mem_, {.max_attempts = 2, .initial_backoff = absl::Microseconds(10)}};
  std::vector<ChunkSpec> chunks_;
  std::unique_ptr<storage::RandomAccessFile> file_;
};

TEST_F(StreamingStoreTest, EveryChunkArrivesWithItsBytes) {
  Build(9);
  auto store = Make(Options(2, 1, PolicyKind::kLfu));
  ASSERT_NE(store, nullptr);
  for (int round = 0; round < 3; ++round) {
    for (ChunkId id = 0; id < 9; ++id) Use(store.get(), id);
  }
  ChunkStoreStats stats = store->Stats();
  EXPECT_EQ(stats.hits + stats.misses, 27);
  EXPECT_GT(stats.prefetch_hits, 0);
  EXPECT_EQ(stats.capacity_bytes, static_cast<int64_t>(3 * kChunk));
  EXPECT_EQ(store->StreamingStats().pinned_hits, 3);
}

TEST_F(StreamingStoreTest, LargeChunksStreamThroughTheirOwnSlots) {
  constexpr uint64_t kLarge = 5 * 4096;
  Build(9, kLarge);  // The 4 attention chunks are large.
  StreamingStoreOptions options = Options(2, 2, PolicyKind::kLfu);
  // Equal slots alone cannot hold them: the error names both sizes.
  auto refused = StreamingChunkStore::Create(&fault_, *file_, chunks_, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("blk.0.attn (20480 bytes)"), std::string::npos)
      << refused.status();
  options.n_large_slots = 2;
  options.large_slot_bytes = kLarge;
  auto store = Make(options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Stats().capacity_bytes, static_cast<int64_t>(3 * kChunk + 2 * kLarge));
  const uint8_t* large_region = store->pool().slot(2);
  for (int round = 0; round < 3; ++round) {
    for (ChunkId id = 0; id < 9; ++id) {
      Use(store.get(), id);
      if (id == 0) continue;
      // Each size class stays in its own slots.
      auto slot = store->Acquire(id);
      ASSERT_TRUE(slot.ok()) << slot.status();
      EXPECT_EQ(*slot >= large_region, chunks_[id].kind == ChunkKind::kAttention) << id;
      store->Release(id);
    }
  }
  EXPECT_GT(store->Stats().prefetch_hits, 0);

  // Both large slots held: a third large chunk cannot be read, and says
  // which slots ran out, while small chunks still stream.
  ASSERT_TRUE(store->Acquire(1).ok());
  ASSERT_TRUE(store->Acquire(3).ok());
  auto none = store->Acquire(5);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(none.status().message().find("all 2 large streaming slots"), std::string::npos)
      << none.status();
  for (ChunkId id : {2, 4, 6, 8}) Use(store.get(), id, /*prefetch=*/false);
  store->Release(1);
  store->Release(3);
  Use(store.get(), 5);
}

// An embedding table the plan left on disk is never read whole: its rows
// come straight from the file; pinned, they are copied from memory.
TEST_F(StreamingStoreTest, EmbeddingRowsAreReadFromTheFile) {
  Build(5);
  chunks_[4].kind = ChunkKind::kEmbeddings;
  chunks_[4].layer = -1;
  StreamingStoreOptions options = Options(2, 1, PolicyKind::kLfu);
  options.access_order = {1, 2, 3};
  auto store = Make(options);
  ASSERT_NE(store, nullptr);
  uint8_t row[100];
  // Bytes 4000..4099 straddle the chunk's two reads.
  ASSERT_TRUE(store->ReadPart(4, 4000, sizeof(row), row).ok());
  for (uint8_t b : row) ASSERT_EQ(b, 5);
  EXPECT_EQ(store->Stats().part_reads, 1);
  EXPECT_EQ(store->Stats().part_bytes, 100);
  const auto refused = store->Acquire(4);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(store->ReadPart(4, kChunk - 50, sizeof(row), row).ok());  // Past its end.
  // The layers still stream through the two slots.
  for (int round = 0; round < 2; ++round) {
    for (ChunkId id : {1, 2, 3}) Use(store.get(), id);
  }
  // Pinned, the table is in memory: no file read.
  options.pinned[4] = true;
  auto pinned = Make(options);
  ASSERT_NE(pinned, nullptr);
  ASSERT_TRUE(pinned->ReadPart(4, 10, sizeof(row), row).ok());
  for (uint8_t b : row) ASSERT_EQ(b, 5);
  EXPECT_EQ(pinned->Stats().part_reads, 0);
}

// On an O_DIRECT file a row's read goes through the store's own aligned
// window: the file never has to allocate a bounce buffer per token.
TEST(StreamingStoreDirectTest, EmbeddingRowsNeedNoBounceBuffer) {
  const std::string path = ::testing::TempDir() + "/direct_rows";
  constexpr uint64_t kTable = 6 * 4096;
  {
    std::string bytes(kTable, 0);
    for (uint64_t i = 0; i < kTable; ++i) bytes[i] = static_cast<char>(i % 251);
    storage::PosixEnv writer;
    auto out = writer.NewWritableFile(path);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*out)->Append(bytes).ok());
    ASSERT_TRUE((*out)->Close().ok());
  }
  storage::PosixEnv env;
  auto file = env.NewRandomAccessFile(path, {.direct = true});
  ASSERT_TRUE(file.ok()) << file.status();
  if (!(*file)->Direct()) GTEST_SKIP() << "no O_DIRECT on this filesystem";
  ChunkSpec table;
  table.name = "embeddings";
  table.kind = ChunkKind::kEmbeddings;
  table.reads.push_back({0, kTable, 0});
  table.slot_bytes = table.tensor_bytes = kTable;
  table.row_bytes = 1000;
  const std::vector<ChunkSpec> chunks = {table};
  StreamingStoreOptions options;
  options.pinned = {false};
  auto store = StreamingChunkStore::Create(&env, **file, chunks, options);
  ASSERT_TRUE(store.ok()) << store.status();
  uint8_t row[1000];
  for (uint64_t r : {0, 4, 7, 23}) {  // Row 4 straddles a 4096 boundary.
    ASSERT_TRUE((*store)->ReadPart(0, r * 1000, sizeof(row), row).ok());
    for (uint64_t i = 0; i < sizeof(row); ++i) {
      ASSERT_EQ(row[i], static_cast<uint8_t>((r * 1000 + i) % 251)) << r << " " << i;
    }
  }
  EXPECT_EQ(env.Stats().bounce_reads, 0u);
  // What the window does not cover still reads, through the file's bounce.
  std::vector<uint8_t> big(3 * 4096);
  ASSERT_TRUE((*store)->ReadPart(0, 100, big.size(), big.data()).ok());
  EXPECT_EQ(big[0], 100);
  EXPECT_GT(env.Stats().bounce_reads, 0u);
}

TEST_F(StreamingStoreTest, ChunksInUseAreNeverEvicted) {
  Build(9);
  auto store = Make(Options(3, 2, PolicyKind::kLru));
  ASSERT_NE(store, nullptr);
  auto held = store->Acquire(1);
  ASSERT_TRUE(held.ok());
  // Prefetch and use everything else around the held chunk, twice.
  for (int round = 0; round < 2; ++round) {
    for (ChunkId id = 2; id < 9; ++id) Use(store.get(), id);
  }
  EXPECT_EQ((*held)[0], 2);
  EXPECT_EQ((*held)[kChunk - 1], 2);
  store->Release(1);
}

TEST_F(StreamingStoreTest, PrefetchStopsAtDepthAndKeepsReadAheadChunks) {
  Build(9);
  auto store = Make(Options(4, 2, PolicyKind::kLru));
  ASSERT_NE(store, nullptr);
  Use(store.get(), 1, /*prefetch=*/false);
  ChunkId upcoming[] = {2, 3, 4, 5};
  store->Prefetch(upcoming);
  store->Prefetch(upcoming);  // Depth reached: no more reads, nothing evicted.
  Use(store.get(), 2, false);
  Use(store.get(), 3, false);
  ChunkStoreStats stats = store->Stats();
  EXPECT_EQ(stats.prefetch_hits, 2);
  EXPECT_EQ(stats.prefetch_wasted, 0);
  EXPECT_EQ(stats.bytes_read, static_cast<int64_t>(4 * kChunk));  // Global + 1, 2, 3.
}

TEST_F(StreamingStoreTest, ReadsNeededNowAndTheReadAheadBehindThemAllLand) {
  // One Prefetch: two chunks the step waits for and two read ahead, as one
  // batch with lanes (which this queue, the threads engine, reads
  // alongside each other; the order itself is io_uring's, tested in
  // storage/read_queue_test): every chunk lands whole, once.
  Build(9);
  auto store = Make(Options(5, 4, PolicyKind::kLru));
  ASSERT_NE(store, nullptr);
  const ChunkId upcoming[] = {3, 4, 5, 6};
  store->Prefetch(upcoming, /*needed_now=*/2);
  for (ChunkId id : upcoming) Use(store.get(), id, /*prefetch=*/false);
  const ChunkStoreStats stats = store->Stats();
  EXPECT_EQ(stats.prefetch_hits, 4);
  EXPECT_EQ(stats.bytes_read, static_cast<int64_t>(5 * kChunk));  // Global + the four.
}

TEST_F(StreamingStoreTest, CyclicScanLfuReadsLessThanLru) {
  Build(17);  // 16 streamed chunks.
  int64_t bytes[2];
  for (PolicyKind policy : {PolicyKind::kLru, PolicyKind::kLfu}) {
    auto store = Make(Options(8, 2, policy));
    ASSERT_NE(store, nullptr);
    for (int round = 0; round < 10; ++round) {
      for (ChunkId id = 0; id < 17; ++id) Use(store.get(), id);
    }
    ChunkStoreStats stats = store->Stats();
    bytes[static_cast<int>(policy)] = stats.bytes_read;
    std::cout << store->policy_name() << ": hits " << stats.hits << " misses " << stats.misses
              << " prefetch hits " << stats.prefetch_hits << " wasted " << stats.prefetch_wasted
              << " bytes " << stats.bytes_read << "\n";
  }
  // LRU reads every streamed chunk every round (and reads ahead into the
  // next); LFU keeps 5 of the 8 slots for good.
  EXPECT_GE(bytes[0], static_cast<int64_t>((1 + 16 * 10) * kChunk));
  EXPECT_LT(bytes[1], bytes[0] * 3 / 4);
}

TEST_F(StreamingStoreTest, ReadErrorFailsThatAcquireOnlyAndIsRetried) {
  Build(9);
  auto store = Make(Options(2, 1, PolicyKind::kLfu));
  ASSERT_NE(store, nullptr);
  fault_.InjectEio({kPath, 5 * kChunk + 4096, 5 * kChunk + 8192}, storage::kFaultForever);
  for (ChunkId id = 1; id < 5; ++id) Use(store.get(), id);  // Prefetches 5, which fails.
  auto slot = store->Acquire(5);
  ASSERT_FALSE(slot.ok());
  const std::string message(slot.status().message());
  for (const char* part : {"blk.2.attn", "/model", "offset 65536", "errno 5"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  EXPECT_GE(store->StreamingStats().read_errors, 1);
  // Still failing on retry; other chunks still work.
  EXPECT_FALSE(store->Acquire(5).ok());
  Use(store.get(), 6);
  fault_.ClearFaults();
  Use(store.get(), 5);
  for (ChunkId id = 0; id < 9; ++id) Use(store.get(), id);
}

TEST_F(StreamingStoreTest, EverythingPinnedNeedsNoSlots) {
  Build(5);
  StreamingStoreOptions o = Options(0, 2, PolicyKind::kLfu);
  o.pinned.assign(5, true);
  auto store = Make(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->prefetch_depth(), 0);
  for (ChunkId id = 0; id < 5; ++id) Use(store.get(), id);
  EXPECT_EQ(store->Stats().misses, 0);
}

TEST_F(StreamingStoreTest, OptionsThatDoNotFitAreRefused) {
  Build(5);
  StreamingStoreOptions o = Options(2, 1, PolicyKind::kLfu);
  o.slot_bytes = 4096;
  auto store = StreamingChunkStore::Create(&fault_, *file_, chunks_, o);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("fits none of"), std::string::npos);
  o = Options(2, 1, PolicyKind::kLfu);
  o.pinned.pop_back();
  EXPECT_FALSE(StreamingChunkStore::Create(&fault_, *file_, chunks_, o).ok());
}

// Chunks off the access order (experts): Ready says whether Acquire would
// wait, and a read-ahead guess the next expert hint does not name again
// stops holding the read-ahead depth (it stays cached).
TEST_F(StreamingStoreTest, ReadyAndStaleGuesses) {
  Build(7);
  StreamingStoreOptions o = Options(/*slots=*/5, /*depth=*/2, PolicyKind::kLru);
  o.access_order = {1, 2};  // 3..6 are "experts".
  auto store = Make(o);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->Ready(0));   // Pinned.
  EXPECT_FALSE(store->Ready(3));  // Absent: not even read.
  const ChunkId guesses[] = {3, 4};
  store->Prefetch(guesses);
  while (!store->Ready(3) || !store->Ready(4)) absl::SleepFor(absl::Milliseconds(1));
  // The depth is used up by the two guesses: a hint naming only the
  // attention chunk reads nothing...
  const ChunkId attention[] = {1};
  store->Prefetch(attention);
  EXPECT_FALSE(store->Ready(1));
  // ...but the next expert hint that names neither makes them stale: its
  // chunks are read, and 3 and 4 are wasted yet still cached.
  const ChunkId routed[] = {5, 6};
  store->Prefetch(routed);
  while (!store->Ready(5) || !store->Ready(6)) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(store->Stats().prefetch_wasted, 2);
  EXPECT_TRUE(store->Ready(3));
  Use(store.get(), 5, /*prefetch=*/false);
  Use(store.get(), 6, /*prefetch=*/false);
  Use(store.get(), 3, /*prefetch=*/false);
  EXPECT_EQ(store->Stats().misses, 0);
  EXPECT_EQ(store->Stats().prefetch_hits, 2);
}

// The FaultEnv range of chunk `id` of a Build with equal chunks.
storage::FaultEnv::Range ChunkRange(ChunkId id) {
  return {kPath, static_cast<uint64_t>(id) * kChunk, static_cast<uint64_t>(id + 1) * kChunk};
}

// Waits (up to 10 s) until `env` has delayed `n` reads; makes no call on
// the store, so the store starts no read meanwhile.
void AwaitDelays(const storage::FaultEnv& env, uint64_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (env.Counters().delays < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
}

// A guess (a hint's chunk off the access order, not needed now) does not
// read while a chunk the step waits for is in flight: it starts when that
// one has landed.
TEST_F(StreamingStoreTest, GuessesWaitForTheReadsNeededNow) {
  auto store = MakeWithExperts();
  ASSERT_NE(store, nullptr);
  fault_.InjectLatency(ChunkRange(3), absl::Milliseconds(150), storage::kFaultForever);
  fault_.InjectLatency(ChunkRange(4), absl::Microseconds(1), storage::kFaultForever);
  const ChunkId hint[] = {3, 4};  // 3 routed, 4 guessed for the next layer.
  store->Prefetch(hint, /*needed_now=*/1);
  AwaitDelays(fault_, 3);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(fault_.Counters().delays, 3u) << "only chunk 3's three pieces are read";
  EXPECT_FALSE(store->Ready(4));
  Use(store.get(), 3, /*prefetch=*/false);
  while (!store->Ready(4)) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(fault_.Counters().delays, 6u);
  Use(store.get(), 4, /*prefetch=*/false);
  EXPECT_EQ(store->Stats().misses, 1) << "3 was waited for; 4 had landed";
  EXPECT_EQ(store->Stats().guesses_stopped, 0);
}

// Guesses read a piece at a time (here: one piece in flight at most); a
// routing that names neither stops them: the one not started never reads,
// the one reading stops after its piece in flight, and both are read whole
// again when acquired after all.
TEST_F(StreamingStoreTest, AGuessTheRoutingDoesNotNameStopsReading) {
  auto store = MakeWithExperts(/*guess_read_bytes=*/1);
  ASSERT_NE(store, nullptr);
  fault_.InjectLatency(ChunkRange(4), absl::Milliseconds(100), storage::kFaultForever);
  fault_.InjectLatency(ChunkRange(5), absl::Microseconds(1), storage::kFaultForever);
  const int64_t before = store->Stats().bytes_read;
  const ChunkId guesses[] = {4, 5};
  store->Prefetch(guesses);  // 4's first piece starts; 5 waits.
  const ChunkId routed[] = {6};
  store->Prefetch(routed, /*needed_now=*/1);
  EXPECT_EQ(store->Stats().guesses_stopped, 2);
  Use(store.get(), 6, /*prefetch=*/false);
  // 4's piece lands and its slot goes back; what it read counts as wasted.
  while (store->Stats().bytes_read < before + static_cast<int64_t>(kChunk + 4096)) {
    EXPECT_FALSE(store->Ready(4));
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(store->Stats().bytes_read, before + static_cast<int64_t>(kChunk + 4096));
  EXPECT_EQ(store->Stats().wasted_bytes, 4096);
  EXPECT_EQ(store->Stats().prefetch_wasted, 0);
  EXPECT_EQ(fault_.Counters().delays, 1u) << "one piece of 4, none of 5";
  EXPECT_FALSE(store->Ready(4));
  EXPECT_FALSE(store->Ready(5));
  fault_.ClearFaults();
  Use(store.get(), 4, /*prefetch=*/false);
  Use(store.get(), 5, /*prefetch=*/false);
  EXPECT_EQ(store->Stats().misses, 3);  // 6 was still reading, then 4 and 5.
  EXPECT_EQ(fault_.Counters().delays, 1u);
}

// A guess still reading piece by piece that the next routing does choose
// reads the rest of its pieces at once and lands whole.
TEST_F(StreamingStoreTest, AGuessTheRoutingChoosesReadsTheRestAtOnce) {
  auto store = MakeWithExperts(/*guess_read_bytes=*/1);
  ASSERT_NE(store, nullptr);
  fault_.InjectLatency(ChunkRange(4), absl::Milliseconds(60), storage::kFaultForever);
  const ChunkId guess[] = {4};
  store->Prefetch(guess);
  const ChunkId routed[] = {4};
  store->Prefetch(routed, /*needed_now=*/1);
  // Fed piece by piece, the second would wait for a call after the first
  // landed.
  AwaitDelays(fault_, 3);
  EXPECT_EQ(fault_.Counters().delays, 3u) << "every piece went out";
  Use(store.get(), 4, /*prefetch=*/false);
  const ChunkStoreStats stats = store->Stats();
  EXPECT_EQ(stats.guesses_stopped, 0);
  EXPECT_EQ(stats.wasted_bytes, 0);
  EXPECT_EQ(stats.prefetch_hits, 1);
}

// Routings at random, each guessing the next, over a file whose reads fail
// (retried or for good), come back short or slow at random: guesses are
// fed, chosen, stopped and dropped in every state their reads can be in,
// and every chunk acquired still holds its own bytes.
TEST_F(StreamingStoreTest, GuessesSurviveRandomRoutingsAndFaults) {
  Build(20);  // 3..19 are "experts".
  StreamingStoreOptions o = Options(/*slots=*/8, /*depth=*/6, PolicyKind::kLru);
  o.access_order = {1, 2};
  o.guess_read_bytes = 4096;  // A piece at a time.
  auto store = Make(o);
  ASSERT_NE(store, nullptr);
  fault_.InjectRandomFaults({.rate = 0.2, .seed = 7, .max_delay = absl::Milliseconds(2)});
  std::mt19937 rng(11);
  std::uniform_int_distribution<ChunkId> expert(3, 19);
  // A chunk's read may fail for good (an eighth of the faulty reads): the
  // Acquire says so and the next one reads it again.
  auto use = [&](ChunkId id) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      auto slot = store->Acquire(id);
      if (!slot.ok()) continue;
      for (uint64_t b = 0; b < kChunk; ++b) {
        ASSERT_EQ((*slot)[b], static_cast<uint8_t>(id + 1)) << "chunk " << id << " byte " << b;
      }
      store->Release(id);
      return;
    }
    FAIL() << "chunk " << id << " never read";
  };
  std::vector<ChunkId> guesses = {expert(rng), expert(rng)};
  for (int step = 0; step < 300; ++step) {
    std::vector<ChunkId> hint;
    for (int j = 0; j < 2; ++j) {  // Routed: often the guesses, not always.
      const ChunkId id = rng() % 3 ? guesses[j] : expert(rng);
      if (std::find(hint.begin(), hint.end(), id) == hint.end()) hint.push_back(id);
    }
    const size_t routed = hint.size();
    guesses = {expert(rng), expert(rng), expert(rng)};
    hint.insert(hint.end(), guesses.begin(), guesses.end());
    store->Prefetch(hint, routed);
    if (rng() % 2) absl::SleepFor(absl::Microseconds(rng() % 500));
    if (rng() % 4 == 0) store->Ready(expert(rng));
    for (size_t j = 0; j < routed; ++j) use(hint[j]);
    if (rng() % 8 == 0) use(guesses[0]);  // Acquired while fed, maybe.
  }
  fault_.ClearFaults();
  for (ChunkId id = 3; id < 20; ++id) use(id);
  const ChunkStoreStats stats = store->Stats();
  EXPECT_GT(stats.guesses_stopped, 0);
  EXPECT_GT(stats.prefetch_hits, 0);
  EXPECT_LE(stats.wasted_bytes, stats.bytes_read);
  EXPECT_GT(fault_.Counters().faulty_reads, 0u);
}

}  // namespace
}  // namespace waste::cache
