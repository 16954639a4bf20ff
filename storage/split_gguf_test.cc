#include "storage/split_gguf.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "storage/gguf.h"
#include "storage/gguf_writer.h"
#include "storage/mem_env.h"
#include "storage/split_gguf_testing.h"

namespace waste::storage {
namespace {

TEST(SplitGgufTest, PartPathsAreGgufSplitsNames) {
  EXPECT_EQ(*SplitPartPath("/m/DeepSeek-R1-UD-IQ1_S-00001-of-00003.gguf", 2, 3),
            "/m/DeepSeek-R1-UD-IQ1_S-00003-of-00003.gguf");
  EXPECT_EQ(*SplitPartPath("x-00001-of-00012.gguf", 9, 12), "x-00010-of-00012.gguf");
  EXPECT_FALSE(SplitPartPath("model.gguf", 1, 2).ok());
  EXPECT_FALSE(SplitPartPath("x-00002-of-00003.gguf", 1, 3).ok());  // Not the first.
  EXPECT_FALSE(SplitPartPath("x-00001-of-00003.gguf", 1, 4).ok());  // Another count.
}

TEST(SplitGgufTest, NamesTakenApart) {
  std::optional<SplitName> name = ParseSplitName("/m/Kimi-K2-Q2_K-00002-of-00009.gguf");
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->prefix, "/m/Kimi-K2-Q2_K");
  EXPECT_EQ(name->index, 1);
  EXPECT_EQ(name->count, 9);
  for (const char* not_split :
       {"model.gguf", "m-00000-of-00003.gguf", "m-00004-of-00003.gguf", "m-0000x-of-00003.gguf",
        "m-00001-of-00003.bin", "-00001-of-00003.gguf"}) {
    EXPECT_FALSE(ParseSplitName(not_split).has_value()) << not_split;
  }
}

TEST(SplitGgufTest, BasesLeaveAHoleAndKeepAlignment) {
  const std::vector<uint64_t> bases = SplitBases({5000, 123, 1});
  ASSERT_EQ(bases.size(), 3u);
  EXPECT_EQ(bases[0], 0u);
  EXPECT_GE(bases[1], 5000 + kSplitGap);
  EXPECT_GE(bases[2], bases[1] + 123 + kSplitGap);
  for (uint64_t b : bases) EXPECT_EQ(b % 4096, 0u);
}

class SplitModelTest : public ::testing::Test {
 protected:
  // Five F32 tensors, tensor i's bytes all 'a' + i.
  void SetUp() override {
    auto out = env_.NewWritableFile("/m.gguf");
    ASSERT_TRUE(out.ok());
    WritableFileSink sink(out->get());
    GgufWriter writer(&sink);
    ASSERT_TRUE(writer.AddString("general.architecture", "llama").ok());
    ASSERT_TRUE(writer.AddUint32("llama.block_count", 7).ok());
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(writer.AddTensor("t" + std::to_string(i), GgmlType::kF32, {64 * (i + 1)}).ok());
    }
    ASSERT_TRUE(writer.WriteHeader().ok());
    for (int i = 0; i < 5; ++i) {
      want_.push_back(std::string(256 * (i + 1), static_cast<char>('a' + i)));
      ASSERT_TRUE(writer.WriteTensorData("t" + std::to_string(i), want_.back()).ok());
    }
    ASSERT_TRUE(writer.Finish().ok());
    ASSERT_TRUE((*out)->Close().ok());
    auto parts = testing::WriteSplitParts(&env_, "/m.gguf", 3);
    ASSERT_TRUE(parts.ok()) << parts.status();
    parts_ = *parts;
  }

  MemEnv env_;
  std::vector<std::string> want_;
  std::vector<std::string> parts_;
};

// Opened by its first part, a split model lists every part's tensors, reads
// their bytes through OpenModelFile, and has the first part's metadata.
TEST_F(SplitModelTest, ReadsAsOneModel) {
  ASSERT_EQ(parts_[0], "/m-00001-of-00003.gguf");
  auto gguf = GgufFile::Open(&env_, parts_[0]);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->split_count(), 3);
  EXPECT_EQ(*(*gguf)->GetUint("llama.block_count"), 7u);
  ASSERT_EQ((*gguf)->tensors().size(), 5u);
  uint64_t disk = 0;
  for (const std::string& p : parts_) disk += *env_.GetFileSize(p);
  EXPECT_EQ((*gguf)->disk_bytes(), disk);
  EXPECT_GT((*gguf)->file_size(), disk + 2 * kSplitGap - 1);

  auto file = OpenModelFile(&env_, **gguf);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Size(), (*gguf)->file_size());
  for (int i = 0; i < 5; ++i) {
    const TensorInfo* t = (*gguf)->FindTensor("t" + std::to_string(i));
    ASSERT_NE(t, nullptr);
    std::string got(t->size, '\0');
    ASSERT_TRUE((*file)->Read(t->offset, t->size, got.data()).ok());
    EXPECT_EQ(got, want_[i]) << t->name;
  }
  // Past a part's end (as a read rounded up to 4 KiB goes): zeros.
  const TensorInfo* last_of_first = (*gguf)->FindTensor("t1");
  std::string tail(last_of_first->size + 5000, 'x');
  ASSERT_TRUE((*file)->Read(last_of_first->offset, tail.size(), tail.data()).ok());
  EXPECT_EQ(tail.substr(0, last_of_first->size), want_[1]);
  EXPECT_EQ(tail.substr(last_of_first->size), std::string(5000, '\0'));
  char byte;
  EXPECT_EQ((*file)->Read((*file)->Size(), 1, &byte).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(SplitModelTest, AnotherPartOrAMissingOneIsRefusedByName) {
  auto second = GgufFile::Open(&env_, parts_[1]);
  EXPECT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("part 2 of a model split in 3"), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find("/m-00001-of-00003.gguf"), std::string::npos);

  auto contents = [&](const std::string& path) {
    auto file = env_.NewRandomAccessFile(path);
    std::string bytes((*file)->Size(), '\0');
    EXPECT_TRUE((*file)->Read(0, bytes.size(), bytes.data()).ok());
    return bytes;
  };
  const std::string part2 = contents(parts_[1]);
  // Part 3 where part 2 belongs.
  env_.SetFile(parts_[1], contents(parts_[2]));
  auto swapped = GgufFile::Open(&env_, parts_[0]);
  EXPECT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("split.no 2 where part 1 belongs"), std::string::npos)
      << swapped.status();

  env_.SetFile(parts_[1], part2);
  ASSERT_TRUE(env_.DeleteFile(parts_[2]).ok());
  auto missing = GgufFile::Open(&env_, parts_[0]);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/m-00003-of-00003.gguf"), std::string::npos)
      << missing.status();
}

TEST_F(SplitModelTest, AWholeFileIsItself) {
  auto gguf = GgufFile::Open(&env_, "/m.gguf");
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ((*gguf)->split_count(), 1);
  EXPECT_EQ((*gguf)->disk_bytes(), (*gguf)->file_size());
  auto file = OpenModelFile(&env_, **gguf);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Size(), (*gguf)->file_size());
}

}  // namespace
}  // namespace waste::storage
