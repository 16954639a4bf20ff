#include "storage/fault_env.h"

#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/mem_env.h"

namespace waste::storage {
namespace {

constexpr RetryPolicy kFastRetry{.max_attempts = 4, .initial_backoff = absl::Microseconds(10)};

class FaultEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    contents_.resize(64 * 1024);
    for (size_t i = 0; i < contents_.size(); ++i) contents_[i] = static_cast<char>(i * 31 + 5);
    base_.SetFile("/model.gguf", contents_);
    base_.SetFile("/other", contents_);
  }

  std::unique_ptr<RandomAccessFile> Open(const std::string& path = "/model.gguf") {
    auto file = env_.NewRandomAccessFile(path);
    EXPECT_TRUE(file.ok()) << file.status();
    return std::move(*file);
  }

  MemEnv base_;
  FaultEnv env_{&base_, kFastRetry};
  std::string contents_;
};

TEST_F(FaultEnvTest, TransientEioIsRetriedAndCounted) {
  env_.InjectEio({"/model.gguf", 1000, 2000}, 2);
  auto file = Open();
  std::string buffer(500, '\0');
  absl::Status status = file->Read(900, 500, buffer.data());
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(buffer, contents_.substr(900, 500));
  FaultCounters counters = env_.Counters();
  EXPECT_EQ(counters.eio, 2u);
  EXPECT_EQ(counters.retries, 2u);
}

TEST_F(FaultEnvTest, PersistentEioNamesPathOffsetLengthAndErrno) {
  env_.InjectEio({"/model.gguf", 4096, 4097}, kFaultForever);
  auto file = Open();
  std::string buffer(100, '\0');
  absl::Status status = file->Read(4000, 100, buffer.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  for (const char* part : {"/model.gguf", "offset 4000", "length 100", "Input/output error",
                           "errno 5", "gave up after 4 attempts"}) {
    EXPECT_NE(status.message().find(part), std::string_view::npos) << part << " in " << status;
  }
  EXPECT_EQ(env_.Counters().eio, 4u);
  EXPECT_EQ(env_.Counters().retries, 3u);
}

TEST_F(FaultEnvTest, FaultsOnlyHitTheirFileAndRange) {
  env_.InjectEio({"/model.gguf", 1000, 2000}, kFaultForever);
  std::string buffer(100, '\0');
  std::string before(1000, '\0');
  EXPECT_TRUE(Open()->Read(0, 1000, before.data()).ok());
  EXPECT_TRUE(Open()->Read(2000, 100, buffer.data()).ok());
  EXPECT_TRUE(Open("/other")->Read(1500, 100, buffer.data()).ok());
  EXPECT_FALSE(Open()->Read(1999, 1, buffer.data()).ok());
  env_.ClearFaults();
  EXPECT_TRUE(Open()->Read(1500, 100, buffer.data()).ok());
}

TEST_F(FaultEnvTest, ShortReadsAreResumed) {
  env_.InjectShortRead({"", 0, UINT64_MAX}, kFaultForever);
  auto file = Open();
  std::string buffer(10000, '\0');
  ASSERT_TRUE(file->Read(123, 10000, buffer.data()).ok());
  EXPECT_EQ(buffer, contents_.substr(123, 10000));
  EXPECT_GT(env_.Counters().short_reads, 5u);
}

TEST_F(FaultEnvTest, CorruptedBytesShowUp) {
  env_.InjectCorruption("/model.gguf", 5000, 0x80);
  auto file = Open();
  std::string buffer(100, '\0');
  ASSERT_TRUE(file->Read(4990, 100, buffer.data()).ok());
  std::string expected = contents_.substr(4990, 100);
  expected[10] ^= static_cast<char>(0x80);
  EXPECT_EQ(buffer, expected);
  ASSERT_TRUE(file->Read(5001, 10, buffer.data()).ok());
  EXPECT_EQ(buffer.substr(0, 10), contents_.substr(5001, 10));
  EXPECT_EQ(env_.Counters().corrupted_bytes, 1u);
}

TEST_F(FaultEnvTest, LatencyIsAdded) {
  env_.InjectLatency({"/model.gguf"}, absl::Milliseconds(30), 1);
  auto file = Open();
  char buffer[10];
  const absl::Time start = absl::Now();
  ASSERT_TRUE(file->Read(0, 10, buffer).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_EQ(env_.Counters().delays, 1u);
}

TEST_F(FaultEnvTest, FaultsReachQueueCompletions) {
  env_.InjectEio({"/model.gguf", 0, 100}, 1);                  // Transient.
  env_.InjectEio({"/model.gguf", 8192, 8193}, kFaultForever);  // Persistent.
  env_.InjectCorruption("/model.gguf", 20000, 0x01);
  auto file = Open();
  for (IoEngine engine : {IoEngine::kAuto, IoEngine::kThreads, IoEngine::kSync}) {
    auto queue = env_.NewReadQueue(file.get(), {.engine = engine, .depth = 4});
    ASSERT_TRUE(queue.ok());
    std::string a(100, '\0'), b(100, '\0'), c(100, '\0');
    std::vector<ReadRequest> requests = {
        {0, 100, a.data(), 1}, {8150, 100, b.data(), 2}, {19950, 100, c.data(), 3}};
    ASSERT_TRUE((*queue)->Submit(requests).ok());
    std::vector<ReadCompletion> completions;
    ASSERT_TRUE((*queue)->Wait(3, &completions).ok());
    ASSERT_EQ(completions.size(), 3u);
    for (const ReadCompletion& completion : completions) {
      if (completion.tag == 2) {
        EXPECT_EQ(completion.status.code(), absl::StatusCode::kUnavailable);
        EXPECT_NE(completion.status.message().find("offset 8150 length 100"),
                  std::string_view::npos)
            << completion.status;
      } else {
        EXPECT_TRUE(completion.status.ok()) << completion.status;
      }
    }
    EXPECT_EQ(a, contents_.substr(0, 100));
    EXPECT_NE(c, contents_.substr(19950, 100));
    EXPECT_EQ(c[50], static_cast<char>(contents_[20000] ^ 0x01));
  }
  EXPECT_GE(env_.Counters().retries, 1u);
}

TEST_F(FaultEnvTest, RandomFaultsFailOnlyReadsWhoseRetriesAllFailed) {
  env_.InjectRandomFaults({.rate = 0.3, .seed = 7, .max_delay = absl::Microseconds(50)});
  auto file = Open();
  int failed = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t offset = (static_cast<uint64_t>(i) * 7919) % (contents_.size() - 1000);
    std::string buffer(1000, '\0');
    absl::Status status = file->Read(offset, buffer.size(), buffer.data());
    if (status.ok()) {
      ASSERT_EQ(buffer, contents_.substr(offset, buffer.size())) << "read " << i;
    } else {
      ++failed;
      EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
      EXPECT_NE(status.message().find("injected"), std::string_view::npos) << status;
      EXPECT_NE(status.message().find("gave up after 4 attempts"), std::string_view::npos)
          << status;
    }
  }
  const FaultCounters counters = env_.Counters();
  EXPECT_EQ(counters.reads, 2000u);
  EXPECT_NEAR(static_cast<double>(counters.faulty_reads), 600, 90);
  EXPECT_EQ(counters.failed_reads, static_cast<uint64_t>(failed));
  EXPECT_NEAR(failed, 75, 35);  // An eighth of the faulty ones.
  EXPECT_GT(counters.short_reads, 100u);
  EXPECT_GT(counters.delays, 100u);
  EXPECT_GT(counters.retries, 300u);

  // The same seed makes the same faults; rate 0 stops them.
  FaultEnv again(&base_, kFastRetry);
  again.InjectRandomFaults({.rate = 0.3, .seed = 7, .max_delay = absl::Microseconds(50)});
  auto file2 = again.NewRandomAccessFile("/model.gguf");
  ASSERT_TRUE(file2.ok());
  int failed_again = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t offset = (static_cast<uint64_t>(i) * 7919) % (contents_.size() - 1000);
    std::string buffer(1000, '\0');
    failed_again += !(*file2)->Read(offset, buffer.size(), buffer.data()).ok();
  }
  EXPECT_EQ(failed_again, failed);
  env_.InjectRandomFaults({.rate = 0});
  std::string buffer(1000, '\0');
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(file->Read(0, buffer.size(), buffer.data()).ok());
  EXPECT_EQ(env_.Counters().reads, 2000u);
}

}  // namespace
}  // namespace waste::storage
