#include "daemon/memory/usable_ram.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::memory {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

class UsableRamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::TempDir();
    paths_.proc_self_cgroup = root_ + "/proc/self/cgroup";
    paths_.proc_meminfo = root_ + "/proc/meminfo";
    paths_.cgroup_root = root_ + "/cgroup";
    Write(paths_.proc_meminfo,
          "MemTotal:       24000000 kB\nMemFree:        1000 kB\nMemAvailable:   20000000 kB\n");
  }
  std::string root_;
  RamProbePaths paths_;
};

TEST_F(UsableRamTest, PhysicalWhenNoCgroupLimit) {
  Write(paths_.proc_self_cgroup, "4:memory:/a/b\n0::/\n");
  Write(paths_.cgroup_root + "/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  auto ram = DetectUsableRam(paths_);
  ASSERT_TRUE(ram.ok()) << ram.status();
  EXPECT_EQ(ram->bytes, 24000000ull * 1024);
  EXPECT_EQ(ram->physical_bytes, 24000000ull * 1024);
  EXPECT_EQ(ram->available_bytes, 20000000ull * 1024);
  EXPECT_EQ(ram->source, "MemTotal (no cgroup memory limit)");
}

TEST_F(UsableRamTest, CgroupV1LimitOfAnAncestorApplies) {
  Write(paths_.proc_self_cgroup, "9:name=systemd:/\n4:memory:/a/b\n0::/\n");
  Write(paths_.cgroup_root + "/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n");
  Write(paths_.cgroup_root + "/memory/a/memory.limit_in_bytes", "8589934592\n");
  auto ram = DetectUsableRam(paths_);
  ASSERT_TRUE(ram.ok()) << ram.status();
  EXPECT_EQ(ram->bytes, 8589934592ull);
  EXPECT_EQ(ram->source, "cgroup v1 memory.limit_in_bytes of /a");
}

TEST_F(UsableRamTest, CgroupV2MemoryMax) {
  Write(paths_.proc_self_cgroup, "0::/user.slice/job\n");
  Write(paths_.cgroup_root + "/user.slice/job/memory.max", "4294967296\n");
  Write(paths_.cgroup_root + "/user.slice/memory.max", "max\n");
  auto ram = DetectUsableRam(paths_);
  ASSERT_TRUE(ram.ok()) << ram.status();
  EXPECT_EQ(ram->bytes, 4294967296ull);
  EXPECT_EQ(ram->source, "cgroup v2 memory.max of /user.slice/job");
}

TEST_F(UsableRamTest, CgroupLimitAbovePhysicalIsNamedButNotUsed) {
  Write(paths_.proc_self_cgroup, "0::/big\n");
  Write(paths_.cgroup_root + "/unified/big/memory.max", "107374182400\n");
  auto ram = DetectUsableRam(paths_);
  ASSERT_TRUE(ram.ok()) << ram.status();
  EXPECT_EQ(ram->bytes, 24000000ull * 1024);
  EXPECT_EQ(ram->source, "MemTotal (cgroup v2 memory.max of /big is larger)");
}

TEST_F(UsableRamTest, MissingMeminfoIsAnErrorSayingWhatToDo) {
  paths_.proc_meminfo = root_ + "/nope";
  auto ram = DetectUsableRam(paths_);
  ASSERT_FALSE(ram.ok());
  EXPECT_NE(ram.status().message().find("--ram-budget"), std::string::npos);
}

TEST(UsableRamRealTest, ThisMachineAnswersSomething) {
  auto ram = DetectUsableRam();
  ASSERT_TRUE(ram.ok()) << ram.status();
  EXPECT_GT(ram->bytes, 0u);
  EXPECT_LE(ram->bytes, ram->physical_bytes);
  EXPECT_FALSE(ram->source.empty());
}

}  // namespace
}  // namespace waste::memory
