#include "storage/mem_env.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "storage/env.h"

namespace waste::storage {
namespace {

TEST(MemEnvTest, WriteThenRead) {
  MemEnv env;
  auto writer = env.NewWritableFile("/m/a");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Append("hello ").ok());
  ASSERT_TRUE((*writer)->Append("world").ok());
  EXPECT_EQ((*writer)->Size(), 11u);
  ASSERT_TRUE((*writer)->Sync().ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_FALSE((*writer)->Append("more").ok());

  auto file = env.NewRandomAccessFile("/m/a", {.direct = true});
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE((*file)->Direct());
  EXPECT_EQ((*file)->Alignment(), 1u);
  EXPECT_EQ((*file)->Size(), 11u);
  char buffer[5];
  ASSERT_TRUE((*file)->Read(6, 5, buffer).ok());
  EXPECT_EQ(std::string(buffer, 5), "world");
  absl::Status past = (*file)->Read(8, 5, buffer);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(past.message().find("/m/a"), std::string_view::npos);
}

TEST(MemEnvTest, ReaderKeepsItsSnapshotAcrossTruncation) {
  MemEnv env;
  env.SetFile("/f", "0123456789");
  auto file = env.NewRandomAccessFile("/f");
  ASSERT_TRUE(file.ok());
  env.SetFile("/f", "xy");
  char buffer[10];
  ASSERT_TRUE((*file)->Read(0, 10, buffer).ok());
  EXPECT_EQ(std::string(buffer, 10), "0123456789");
  EXPECT_EQ(*env.GetFileSize("/f"), 2u);
}

TEST(MemEnvTest, FileOperations) {
  MemEnv env;
  EXPECT_FALSE(env.FileExists("/x"));
  EXPECT_EQ(env.NewRandomAccessFile("/x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(env.GetFileSize("/x").status().code(), absl::StatusCode::kNotFound);
  env.SetFile("/x", "abc");
  ASSERT_TRUE(env.RenameFile("/x", "/y").ok());
  EXPECT_FALSE(env.FileExists("/x"));
  EXPECT_TRUE(env.FileExists("/y"));
  EXPECT_EQ(env.RenameFile("/x", "/z").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(env.DeleteFile("/y").ok());
  EXPECT_EQ(env.DeleteFile("/y").code(), absl::StatusCode::kNotFound);
}

TEST(MemEnvTest, AtomicWriteAndReadBack) {
  MemEnv env;
  ASSERT_TRUE(WriteFileAtomically(&env, "/cfg", "a = 1\n").ok());
  ASSERT_TRUE(WriteFileAtomically(&env, "/cfg", "a = 2\n").ok());
  auto text = ReadFileToString(&env, "/cfg");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a = 2\n");
  EXPECT_EQ(ReadFileToString(&env, "/none").status().code(), absl::StatusCode::kNotFound);
}

TEST(MemEnvTest, QueuesAndConcurrentReaders) {
  MemEnv env;
  std::string contents(1 << 16, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 7);
  env.SetFile("/big", contents);
  auto file = env.NewRandomAccessFile("/big");
  ASSERT_TRUE(file.ok());

  EXPECT_EQ(env.NewReadQueue(file->get(), {.engine = IoEngine::kIoUring}).status().code(),
            absl::StatusCode::kUnimplemented);
  for (IoEngine engine : {IoEngine::kAuto, IoEngine::kThreads, IoEngine::kSync}) {
    auto queue = env.NewReadQueue(file->get(), {.engine = engine, .depth = 3});
    ASSERT_TRUE(queue.ok());
    EXPECT_EQ((*queue)->Engine(), engine == IoEngine::kSync ? IoEngine::kSync : IoEngine::kThreads);
    std::vector<std::string> buffers(20, std::string(1000, '\0'));
    std::vector<ReadRequest> requests;
    for (int i = 0; i < 20; ++i) {
      requests.push_back({.offset = i * 3000u,
                          .length = 1000,
                          .buffer = buffers[i].data(),
                          .tag = static_cast<uint64_t>(i)});
    }
    ASSERT_TRUE((*queue)->Submit(requests).ok());
    std::vector<ReadCompletion> completions;
    while ((*queue)->Outstanding() > 0) ASSERT_TRUE((*queue)->Wait(1, &completions).ok());
    ASSERT_EQ(completions.size(), 20u);
    for (const ReadCompletion& c : completions) {
      ASSERT_TRUE(c.status.ok());
      EXPECT_EQ(buffers[c.tag], contents.substr(c.tag * 3000, 1000));
    }
  }

  std::vector<std::thread> readers;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      char buffer[256];
      for (int i = 0; i < 1000; ++i) {
        uint64_t offset = (i * 997 + t * 131) % (contents.size() - 256);
        if (!(*file)->Read(offset, 256, buffer).ok() ||
            std::memcmp(buffer, contents.data() + offset, 256) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& reader : readers) reader.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace waste::storage
