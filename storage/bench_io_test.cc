#include "storage/bench_io.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "storage/mem_env.h"
#include "tests/testdata.h"

namespace waste::storage {
namespace {

BenchIoOptions SmallGrid() {
  BenchIoOptions options;
  options.depths = {1, 4};
  options.read_sizes = {64 << 10, 256 << 10, 8 << 20};  // 8 MiB is larger than the file.
  options.bytes_per_cell = 1 << 20;
  return options;
}

TEST(BenchIoTest, PosixFilePrintsBothTablesAndTheLimit) {
  const std::string path = waste::testing::TempDir() + "/bench.bin";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, std::string(2 << 20, 'x')).ok());
  auto report = MeasureBenchIo(Env::Default(), path, SmallGrid());
  ASSERT_TRUE(report.ok()) << report.status();
  // Two modes (or one, where O_DIRECT is refused) x 2 sizes x 2 depths.
  EXPECT_EQ(report->cells.size(), report->direct_refused ? 4u : 8u);
  for (const BenchIoCell& cell : report->cells) {
    EXPECT_EQ(cell.bytes, uint64_t{1} << 20);
    EXPECT_GT(cell.GigabytesPerSecond(), 0);
  }
  std::ostringstream out;
  PrintBenchIo(*report, out);
  const std::string text = out.str();
  EXPECT_NE(text.find("limit: "), std::string::npos) << text;
  EXPECT_NE(text.find("buffered (page cache), GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("smaller than RAM"), std::string::npos) << text;
  EXPECT_NE(text.find("reads in flight |   64 KiB |  256 KiB"), std::string::npos) << text;
  if (!report->direct_refused) {
    EXPECT_NE(text.find("O_DIRECT, GB/s"), std::string::npos);
  }
}

TEST(BenchIoTest, MemEnvHasNoDirectMode) {
  MemEnv env;
  env.SetFile("/f", std::string(1 << 20, 'y'));
  std::ostringstream out;
  BenchIoOptions options = SmallGrid();
  ASSERT_TRUE(RunBenchIo(&env, "/f", options, out).ok());
  EXPECT_NE(out.str().find("refused O_DIRECT"), std::string::npos) << out.str();
}

TEST(BenchIoTest, FileSmallerThanEveryReadIsAnError) {
  MemEnv env;
  env.SetFile("/tiny", "abc");
  std::ostringstream out;
  absl::Status status = RunBenchIo(&env, "/tiny", SmallGrid(), out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunBenchIo(&env, "/missing", SmallGrid(), out).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace waste::storage
