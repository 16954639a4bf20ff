#include "storage/posix_env.h"

#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "storage/aligned_buffer.h"
#include "storage/env.h"
#include "tests/testdata.h"

namespace waste::storage {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

class PosixEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = waste::testing::TempDir();
    path_ = dir_ + "/data.bin";
    // Not a multiple of 4096, so the last block is partial.
    contents_ = RandomBytes(5 * 1024 * 1024 + 1234, 7);
    auto file = env_.NewWritableFile(path_);
    ASSERT_TRUE(file.ok()) << file.status();
    // Uneven appends exercise the write buffer's flush paths.
    ASSERT_TRUE((*file)->Append(std::string_view(contents_).substr(0, 100)).ok());
    ASSERT_TRUE((*file)->Append(std::string_view(contents_).substr(100, 2 << 20)).ok());
    ASSERT_TRUE((*file)->Append(std::string_view(contents_).substr(100 + (2 << 20))).ok());
    EXPECT_EQ((*file)->Size(), contents_.size());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->Close().ok());
  }

  void ExpectReadMatches(const RandomAccessFile& file, uint64_t offset, size_t n, char* buffer) {
    absl::Status status = file.Read(offset, n, buffer);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(std::memcmp(buffer, contents_.data() + offset, n), 0)
        << "offset " << offset << " length " << n;
  }

  PosixEnv env_{RetryPolicy{.max_attempts = 3, .initial_backoff = absl::Microseconds(10)}};
  std::string dir_;
  std::string path_;
  std::string contents_;
};

TEST_F(PosixEnvTest, BufferedReadsReturnWhatWasWritten) {
  auto file = env_.NewRandomAccessFile(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE((*file)->Direct());
  EXPECT_EQ((*file)->Alignment(), 1u);
  EXPECT_EQ((*file)->Size(), contents_.size());
  EXPECT_EQ((*file)->Path(), path_);
  std::string buffer(contents_.size(), '\0');
  ExpectReadMatches(**file, 0, contents_.size(), buffer.data());
  ExpectReadMatches(**file, 12345, 777, buffer.data() + 3);
}

TEST_F(PosixEnvTest, DirectReadsAlignedAndUnalignedReturnWhatWasWritten) {
  auto file = env_.NewRandomAccessFile(path_, {.direct = true});
  ASSERT_TRUE(file.ok()) << file.status();
  if (!(*file)->Direct()) {
    GTEST_SKIP() << "the test directory's filesystem refuses O_DIRECT";
  }
  EXPECT_EQ((*file)->Alignment(), kDirectIoAlignment);
  AlignedBuffer buffer(contents_.size() + 2 * kDirectIoAlignment);

  // Aligned: straight into the caller's buffer, no bounce.
  uint64_t bounces = env_.Stats().bounce_reads;
  ExpectReadMatches(**file, 0, 1 << 20, buffer.data());
  ExpectReadMatches(**file, 8192, 4096, buffer.data());
  EXPECT_EQ(env_.Stats().bounce_reads, bounces);

  // Unaligned offset, length and buffer in every combination, including
  // the partial last block and a read larger than one bounce buffer.
  ExpectReadMatches(**file, 1, 4096, buffer.data());
  ExpectReadMatches(**file, 4096, 100, buffer.data());
  ExpectReadMatches(**file, 4096, 4096, buffer.data() + 1);
  ExpectReadMatches(**file, 5000, 9 << 20 >> 2, buffer.data() + 7);
  ExpectReadMatches(**file, contents_.size() - 1000, 1000, buffer.data());
  ExpectReadMatches(**file, 3, contents_.size() - 3, buffer.data() + 5);
  EXPECT_EQ(env_.Stats().bounce_reads, bounces + 6);
}

TEST_F(PosixEnvTest, ReadPastEndIsOutOfRange) {
  for (bool direct : {false, true}) {
    auto file = env_.NewRandomAccessFile(path_, {.direct = direct});
    ASSERT_TRUE(file.ok()) << file.status();
    char buffer[16];
    EXPECT_EQ((*file)->Read(contents_.size() - 8, 16, buffer).code(),
              absl::StatusCode::kOutOfRange);
    EXPECT_EQ((*file)->Read(contents_.size() + 1, 0, buffer).code(), absl::StatusCode::kOutOfRange);
    EXPECT_TRUE((*file)->Read(contents_.size(), 0, buffer).ok());
  }
}

TEST_F(PosixEnvTest, MissingFileIsNotFound) {
  auto file = env_.NewRandomAccessFile(dir_ + "/nope");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nope"), std::string_view::npos);
  EXPECT_EQ(env_.GetFileSize(dir_ + "/nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PosixEnvTest, FileOperations) {
  EXPECT_TRUE(env_.FileExists(path_));
  auto size = env_.GetFileSize(path_);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, contents_.size());
  const std::string moved = dir_ + "/moved.bin";
  ASSERT_TRUE(env_.RenameFile(path_, moved).ok());
  EXPECT_FALSE(env_.FileExists(path_));
  EXPECT_TRUE(env_.FileExists(moved));
  ASSERT_TRUE(env_.DeleteFile(moved).ok());
  EXPECT_FALSE(env_.FileExists(moved));
  EXPECT_EQ(env_.DeleteFile(moved).code(), absl::StatusCode::kNotFound);
}

TEST_F(PosixEnvTest, WriteFileAtomicallyReplacesAndLeavesNoTemporary) {
  const std::string target = dir_ + "/hotlist.txt";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), target, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), target, "second version").ok());
  auto read = ReadFileToString(Env::Default(), target);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "second version");
  EXPECT_FALSE(Env::Default()->FileExists(target + ".tmp." + std::to_string(getpid()) + ".0"));
  EXPECT_FALSE(WriteFileAtomically(Env::Default(), dir_ + "/no/such/dir/x", "y").ok());
}

TEST(RetryTransientTest, RetriesUnavailableThenSucceeds) {
  RetryPolicy policy{.max_attempts = 4, .initial_backoff = absl::Microseconds(1)};
  std::atomic<uint64_t> retries{0};
  int calls = 0;
  absl::Status status = RetryTransient(
      policy, [&] { return ++calls < 3 ? absl::UnavailableError("flaky") : absl::OkStatus(); },
      &retries);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(retries.load(), 2u);
}

TEST(RetryTransientTest, GivesUpAndSaysSo) {
  RetryPolicy policy{.max_attempts = 3, .initial_backoff = absl::Microseconds(1)};
  int calls = 0;
  absl::Status status = RetryTransient(policy, [&] {
    ++calls;
    return absl::UnavailableError("disk says no");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 3);
  EXPECT_NE(status.message().find("disk says no (gave up after 3 attempts)"),
            std::string_view::npos);
}

TEST(RetryTransientTest, OtherErrorsAreNotRetried) {
  int calls = 0;
  absl::Status status = RetryTransient({}, [&] {
    ++calls;
    return absl::OutOfRangeError("past the end");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(calls, 1);
}

TEST(PosixErrorTest, MapsTransientErrnoToUnavailable) {
  absl::Status status = PosixError(EIO, "read of /x at offset 1 length 2");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "read of /x at offset 1 length 2: Input/output error (errno 5)");
  EXPECT_EQ(PosixError(ENOENT, "open").code(), absl::StatusCode::kNotFound);
}

TEST(IoEngineNameTest, Names) {
  EXPECT_STREQ(IoEngineName(IoEngine::kAuto), "auto");
  EXPECT_STREQ(IoEngineName(IoEngine::kIoUring), "io_uring");
  EXPECT_STREQ(IoEngineName(IoEngine::kThreads), "threads");
  EXPECT_STREQ(IoEngineName(IoEngine::kSync), "sync");
}

}  // namespace
}  // namespace waste::storage
