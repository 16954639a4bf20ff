// Every ReadQueue engine, buffered and O_DIRECT, against the bytes written.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "gtest/gtest.h"
#include "storage/aligned_buffer.h"
#include "storage/env.h"
#include "storage/io_uring_queue.h"
#include "storage/posix_env.h"
#include "tests/testdata.h"

namespace waste::storage {
namespace {

constexpr size_t kFileSize = 8 * 1024 * 1024 + 555;

class ReadQueueTest : public ::testing::TestWithParam<std::tuple<IoEngine, bool>> {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(waste::testing::TempDir() + "/queue.bin");
    contents_ = new std::string(kFileSize, '\0');
    std::mt19937 rng(11);
    for (char& c : *contents_) c = static_cast<char>(rng());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), *path_, *contents_).ok());
  }

  void SetUp() override {
    auto [engine, direct] = GetParam();
    if (engine == IoEngine::kIoUring && !IoUringAvailable()) {
      GTEST_SKIP() << "io_uring is unavailable here";
    }
    auto file = env_.NewRandomAccessFile(*path_, {.direct = direct});
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }

  std::unique_ptr<ReadQueue> NewQueue(int depth) {
    auto queue = env_.NewReadQueue(
        file_.get(), {.engine = std::get<0>(GetParam()), .depth = depth, .threads = 4});
    EXPECT_TRUE(queue.ok()) << queue.status();
    return queue.ok() ? std::move(*queue) : nullptr;
  }

  static std::string* path_;
  static std::string* contents_;
  PosixEnv env_{RetryPolicy{.max_attempts = 3, .initial_backoff = absl::Microseconds(10)}};
  std::unique_ptr<RandomAccessFile> file_;
};

std::string* ReadQueueTest::path_ = nullptr;
std::string* ReadQueueTest::contents_ = nullptr;

TEST_P(ReadQueueTest, ManyRandomReadsReturnCorrectBytesAndTags) {
  std::mt19937_64 rng(static_cast<uint64_t>(std::get<0>(GetParam())) * 2 + std::get<1>(GetParam()));
  for (int depth : {1, 2, 4, 8, 16, 32}) {
    SCOPED_TRACE(depth);
    std::unique_ptr<ReadQueue> queue = NewQueue(depth);
    ASSERT_NE(queue, nullptr);
    EXPECT_EQ(queue->Engine(), std::get<0>(GetParam()));
    constexpr int kReads = 96;
    // Half aligned (straight to the buffer under O_DIRECT), half not (bounced).
    std::vector<AlignedBuffer> buffers;
    std::vector<ReadRequest> requests;
    for (int i = 0; i < kReads; ++i) {
      ReadRequest request;
      const bool aligned = i % 2 == 0;
      request.length = aligned ? kDirectIoAlignment * (1 + rng() % 64) : 1 + rng() % 300000;
      const uint64_t max_offset = kFileSize - request.length;
      request.offset =
          aligned ? AlignDown(rng() % max_offset, kDirectIoAlignment) : rng() % (max_offset + 1);
      buffers.emplace_back(request.length + 64);
      request.buffer = buffers.back().data() + (aligned ? 0 : 1 + rng() % 63);
      request.tag = 1000 + i;
      request.chain = static_cast<uint16_t>(rng() % 4);  // Some alone, some in chains.
      requests.push_back(request);
    }
    // Submit in uneven batches, waiting for some in between, so reads queue
    // inside the engine beyond its depth.
    std::map<uint64_t, absl::Status> seen;
    std::vector<ReadCompletion> completions;
    size_t next = 0;
    while (next < requests.size()) {
      const size_t batch = std::min<size_t>(1 + rng() % 40, requests.size() - next);
      ASSERT_TRUE(queue->Submit(std::span(requests).subspan(next, batch)).ok());
      next += batch;
      auto waited = queue->Wait(1, &completions);
      ASSERT_TRUE(waited.ok()) << waited.status();
      EXPECT_GE(*waited, 1u);
    }
    while (queue->Outstanding() > 0) {
      ASSERT_TRUE(queue->Wait(queue->Outstanding(), &completions).ok());
    }
    ASSERT_EQ(completions.size(), requests.size());
    for (const ReadCompletion& completion : completions) {
      ASSERT_TRUE(completion.status.ok()) << completion.status;
      ASSERT_TRUE(seen.emplace(completion.tag, completion.status).second) << "duplicate tag";
      const ReadRequest& request = requests[completion.tag - 1000];
      ASSERT_EQ(std::memcmp(request.buffer, contents_->data() + request.offset, request.length), 0)
          << "tag " << completion.tag << " offset " << request.offset << " length "
          << request.length;
    }
  }
}

TEST_P(ReadQueueTest, PastEndAndEmptyReadsComplete) {
  std::unique_ptr<ReadQueue> queue = NewQueue(4);
  ASSERT_NE(queue, nullptr);
  AlignedBuffer buffer(8192);
  std::vector<ReadRequest> requests = {
      {.offset = kFileSize - 100, .length = 200, .buffer = buffer.data(), .tag = 1},
      {.offset = 0, .length = 0, .buffer = buffer.data(), .tag = 2},
      {.offset = kFileSize - 100, .length = 100, .buffer = buffer.data(), .tag = 3},
  };
  ASSERT_TRUE(queue->Submit(requests).ok());
  std::vector<ReadCompletion> completions;
  auto waited = queue->Wait(3, &completions);
  ASSERT_TRUE(waited.ok());
  ASSERT_EQ(*waited, 3u);
  EXPECT_EQ(queue->Outstanding(), 0u);
  std::map<uint64_t, absl::Status> by_tag;
  for (auto& c : completions) by_tag[c.tag] = c.status;
  EXPECT_EQ(by_tag[1].code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(by_tag[1].message().find(*path_), std::string_view::npos) << by_tag[1];
  EXPECT_TRUE(by_tag[2].ok());
  EXPECT_TRUE(by_tag[3].ok()) << by_tag[3];
  EXPECT_EQ(std::memcmp(buffer.data(), contents_->data() + kFileSize - 100, 100), 0);
}

// A file that shrinks under an open reader (a model file truncated while
// loaded): reads of what is gone fail with DATA_LOSS, never spin. (O_DIRECT
// resumes a short read at the start of its partial block, which once made a
// read at the new end of file repeat forever.)
TEST_P(ReadQueueTest, AFileThatShrankIsDataLossNotAHang) {
  const auto [engine, direct] = GetParam();
  const std::string path = waste::testing::TempDir() + "/shrinks.bin";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, contents_->substr(0, 4 * 4096)).ok());
  auto file = env_.NewRandomAccessFile(path, {.direct = direct});
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(truncate(path.c_str(), 4096 + 1000), 0);

  AlignedBuffer buffer(4 * 4096 + 4096);
  for (uint64_t offset : {uint64_t{0}, uint64_t{4096}, uint64_t{100}}) {
    SCOPED_TRACE(offset);
    const size_t length = 3 * 4096 - offset % 4096;
    absl::Status status = (*file)->Read(offset, length, buffer.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find("unexpected end of file"), std::string_view::npos) << status;

    auto queue = env_.NewReadQueue(file->get(), {.engine = engine, .depth = 4, .threads = 2});
    ASSERT_TRUE(queue.ok()) << queue.status();
    const ReadRequest request{
        .offset = offset, .length = length, .buffer = buffer.data(), .tag = 9};
    ASSERT_TRUE((*queue)->Submit(std::span(&request, 1)).ok());
    std::vector<ReadCompletion> completions;
    ASSERT_TRUE((*queue)->Wait(1, &completions).ok());
    ASSERT_EQ(completions.size(), 1u);
    EXPECT_EQ(completions[0].status.code(), absl::StatusCode::kDataLoss) << completions[0].status;
  }
  // What is still there reads fine.
  ASSERT_TRUE((*file)->Read(0, 4096 + 1000, buffer.data()).ok());
  EXPECT_EQ(std::memcmp(buffer.data(), contents_->data(), 4096 + 1000), 0);
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<IoEngine, bool>>& info) {
  return std::string(IoEngineName(std::get<0>(info.param))) +
         (std::get<1>(info.param) ? "_direct" : "_buffered");
}

INSTANTIATE_TEST_SUITE_P(Engines, ReadQueueTest,
                         ::testing::Combine(::testing::Values(IoEngine::kIoUring,
                                                              IoEngine::kThreads, IoEngine::kSync),
                                            ::testing::Bool()),
                         ParamName);

TEST(ReadQueueAutoTest, AutoResolvesToARealEngine) {
  const std::string path = waste::testing::TempDir() + "/auto.bin";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, "hello").ok());
  auto file = Env::Default()->NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok());
  auto queue = Env::Default()->NewReadQueue(file->get());
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ((*queue)->Engine(), IoUringAvailable() ? IoEngine::kIoUring : IoEngine::kThreads);
  EXPECT_EQ(Env::Default()->NewReadQueue(file->get(), {.depth = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IoUringChainTest, AChainReadsInItsOrder) {
  if (!IoUringAvailable()) GTEST_SKIP() << "io_uring is unavailable here";
  const std::string path = waste::testing::TempDir() + "/chain.bin";
  constexpr size_t kLarge = 32 << 20;
  std::string contents(kLarge + 8192, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, contents).ok());
  // The large read comes from the disk (the kernel's workers read it), the
  // blocks behind it from the page cache (they would complete at once).
  {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  auto file = Env::Default()->NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  AlignedBuffer large(kLarge), small(4096), alone(4096);
  ASSERT_TRUE((*file)->Read(kLarge, 8192, large.data()).ok());
  auto queue = Env::Default()->NewReadQueue(file->get(), {.engine = IoEngine::kIoUring});
  ASSERT_TRUE(queue.ok()) << queue.status();
  // A block chained behind the large read starts only when that has
  // landed, so it completes after it; one alone need not wait.
  ASSERT_TRUE(
      (*queue)
          ->Submit(std::vector<ReadRequest>{
              {.offset = 0, .length = kLarge, .buffer = large.data(), .tag = 1, .chain = 5},
              {.offset = kLarge + 4096, .length = 4096, .buffer = alone.data(), .tag = 3},
              {.offset = kLarge, .length = 4096, .buffer = small.data(), .tag = 2, .chain = 5}})
          .ok());
  std::vector<ReadCompletion> completions;
  while (completions.size() < 3) ASSERT_TRUE((*queue)->Wait(1, &completions).ok());
  std::vector<uint64_t> chained;
  for (const ReadCompletion& c : completions) {
    EXPECT_TRUE(c.status.ok()) << c.status;
    if (c.tag != 3) chained.push_back(c.tag);
  }
  EXPECT_EQ(chained, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(std::memcmp(large.data(), contents.data(), kLarge), 0);
  EXPECT_EQ(std::memcmp(small.data(), contents.data() + kLarge, 4096), 0);
  EXPECT_EQ(std::memcmp(alone.data(), contents.data() + kLarge + 4096, 4096), 0);
}

// The io_uring paths a healthy disk never takes, reached through the
// queue's result hook.
class IoUringFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IoUringAvailable()) GTEST_SKIP() << "io_uring is unavailable here";
    path_ = waste::testing::TempDir() + "/uring.bin";
    contents_.resize(1 << 20);
    for (size_t i = 0; i < contents_.size(); ++i) contents_[i] = static_cast<char>(i * 13 + 1);
    ASSERT_TRUE(WriteFileAtomically(&env_, path_, contents_).ok());
    auto file = env_.NewRandomAccessFile(path_, {.direct = true});
    ASSERT_TRUE(file.ok());
    file_ = std::move(*file);
    auto queue = env_.NewReadQueue(file_.get(), {.engine = IoEngine::kIoUring, .depth = 2});
    ASSERT_TRUE(queue.ok());
    queue_.reset(static_cast<IoUringReadQueue*>(queue->release()));
  }

  std::vector<ReadCompletion> ReadAll(std::vector<ReadRequest> requests) {
    EXPECT_TRUE(queue_->Submit(requests).ok());
    std::vector<ReadCompletion> completions;
    EXPECT_TRUE(queue_->Wait(requests.size(), &completions).ok());
    return completions;
  }

  PosixEnv env_{RetryPolicy{.max_attempts = 3, .initial_backoff = absl::Microseconds(10)}};
  std::string path_;
  std::string contents_;
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<IoUringReadQueue> queue_;
};

TEST_F(IoUringFaultTest, TransientErrorsAreRetried) {
  int failures = 0;
  queue_->SetResultHookForTesting(
      [&](uint64_t tag, int result) { return tag == 1 && failures++ < 2 ? -EIO : result; });
  AlignedBuffer buffer(8192);
  auto completions = ReadAll({{.offset = 4096, .length = 8192, .buffer = buffer.data(), .tag = 1}});
  ASSERT_EQ(completions.size(), 1u);
  EXPECT_TRUE(completions[0].status.ok()) << completions[0].status;
  EXPECT_EQ(std::memcmp(buffer.data(), contents_.data() + 4096, 8192), 0);
  EXPECT_EQ(env_.Stats().retries, 2u);
}

TEST_F(IoUringFaultTest, PersistentErrorNamesTheRead) {
  queue_->SetResultHookForTesting([](uint64_t, int) { return -EIO; });
  AlignedBuffer buffer(100);
  auto completions = ReadAll({{.offset = 10, .length = 100, .buffer = buffer.data(), .tag = 7}});
  ASSERT_EQ(completions.size(), 1u);
  const absl::Status& status = completions[0].status;
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  for (const std::string& part :
       {path_, std::string("offset 10 length 100"), std::string("Input/output error (errno 5)"),
        std::string("gave up after 3 attempts")}) {
    EXPECT_NE(status.message().find(part), std::string_view::npos) << part << " in " << status;
  }
}

TEST_F(IoUringFaultTest, ShortReadsAreResubmitted) {
  // Report a third of each read (rounded to blocks, at least one block);
  // the queue must ask again for the rest, aligned and bounced alike.
  int calls = 0;
  queue_->SetResultHookForTesting([&](uint64_t, int result) {
    ++calls;
    return result > 8192 ? static_cast<int>(AlignDown(result / 3, 4096)) + 4096 : result;
  });
  AlignedBuffer aligned(256 << 10);
  std::string unaligned(100000, '\0');
  auto completions =
      ReadAll({{.offset = 8192, .length = 256 << 10, .buffer = aligned.data(), .tag = 1},
               {.offset = 777, .length = 100000, .buffer = unaligned.data(), .tag = 2}});
  ASSERT_EQ(completions.size(), 2u);
  for (const auto& completion : completions) EXPECT_TRUE(completion.status.ok());
  EXPECT_EQ(std::memcmp(aligned.data(), contents_.data() + 8192, 256 << 10), 0);
  EXPECT_EQ(unaligned, contents_.substr(777, 100000));
  EXPECT_GT(calls, 4);
}

// The hook fails a read after the kernel has done it, so this checks the
// queue's side of a chain (each read reports on its own; one read's retries
// and failure leave the others' results alone), not the kernel's links.
TEST_F(IoUringFaultTest, AReadThatFailsInAChainFailsAlone) {
  queue_->SetResultHookForTesting(
      [](uint64_t tag, int result) { return tag == 1 ? -EIO : result; });
  AlignedBuffer a(4096), b(4096), c(4096);
  auto completions =
      ReadAll({{.offset = 0, .length = 4096, .buffer = a.data(), .tag = 1, .chain = 1},
               {.offset = 4096, .length = 4096, .buffer = b.data(), .tag = 2, .chain = 1},
               {.offset = 8192, .length = 4096, .buffer = c.data(), .tag = 3, .chain = 1}});
  ASSERT_EQ(completions.size(), 3u);
  for (const ReadCompletion& done : completions) {
    EXPECT_EQ(done.status.ok(), done.tag != 1) << done.tag << ": " << done.status;
  }
  EXPECT_EQ(std::memcmp(b.data(), contents_.data() + 4096, 4096), 0);
  EXPECT_EQ(std::memcmp(c.data(), contents_.data() + 8192, 4096), 0);
}

TEST_F(IoUringFaultTest, UnexpectedEndOfFileIsDataLoss) {
  queue_->SetResultHookForTesting([](uint64_t, int) { return 0; });
  AlignedBuffer buffer(4096);
  auto completions = ReadAll({{.offset = 0, .length = 4096, .buffer = buffer.data(), .tag = 1}});
  ASSERT_EQ(completions.size(), 1u);
  EXPECT_EQ(completions[0].status.code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace waste::storage
