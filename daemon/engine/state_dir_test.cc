#include "daemon/engine/state_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

TEST(StateDirTest, RemovesOnlyTemporaryFilesOfWritersThatAreGone) {
  // A pid that was ours a moment ago and is gone now.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);

  const std::string dir = testing::TempDir();
  std::filesystem::create_directories(dir + "/sessions/0123456789abcdef");
  const std::string sessions = dir + "/sessions/0123456789abcdef";
  const std::string dead = absl::StrCat(child);
  const std::vector<std::string> stale = {
      sessions + "/s1.session.tmp." + dead,
      dir + "/hotlist-0123456789abcdef.txt.tmp." + dead + ".7",
  };
  const std::vector<std::string> kept = {
      sessions + "/s1.session",
      dir + "/hotlist-0123456789abcdef.txt",
      TemporaryStatePath(sessions + "/s2.session"),  // Ours: being written.
      sessions + "/odd.tmp.name",
  };
  for (const std::string& path : stale) Touch(path);
  for (const std::string& path : kept) Touch(path);

  EXPECT_EQ(RemoveStaleTemporaryFiles(dir), 2);
  for (const std::string& path : stale) EXPECT_FALSE(std::filesystem::exists(path)) << path;
  for (const std::string& path : kept) EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_EQ(RemoveStaleTemporaryFiles(dir), 0);
  EXPECT_EQ(RemoveStaleTemporaryFiles(dir + "/missing"), 0);
  EXPECT_EQ(RemoveStaleTemporaryFiles(""), 0);
}

}  // namespace
}  // namespace waste::engine
