#include "daemon/kernels/cpu_features.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace waste::kernels {
namespace {

TEST(CpuFeaturesTest, PhysicalCoresIsBetweenOneAndLogicalCpus) {
  const int cores = PhysicalCores();
  EXPECT_GE(cores, 1);
  const unsigned logical = std::thread::hardware_concurrency();
  if (logical > 0) {
    EXPECT_LE(cores, static_cast<int>(logical));
  }
}

// A fake /sys/devices/system/cpu: cpuN/topology/{physical_package_id,die_id,core_id}.
class FakeTopology {
 public:
  FakeTopology() : root_(std::string(::testing::TempDir()) + "/cpu_topology") {
    std::filesystem::remove_all(root_);
  }
  void AddCpu(int cpu, int package, int die, int core) {
    const std::filesystem::path dir = root_ / ("cpu" + std::to_string(cpu)) / "topology";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "physical_package_id") << package << "\n";
    if (die >= 0) std::ofstream(dir / "die_id") << die << "\n";
    std::ofstream(dir / "core_id") << core << "\n";
  }
  std::string dir() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

TEST(CpuFeaturesTest, CountsSmtSiblingsOnce) {
  FakeTopology topo;
  // 2 packages x 2 cores x 2 threads; Linux numbers the second threads last.
  topo.AddCpu(0, 0, 0, 0);
  topo.AddCpu(1, 0, 0, 1);
  topo.AddCpu(2, 1, 0, 0);
  topo.AddCpu(3, 1, 0, 1);
  topo.AddCpu(4, 0, 0, 0);
  topo.AddCpu(5, 0, 0, 1);
  topo.AddCpu(6, 1, 0, 0);
  topo.AddCpu(7, 1, 0, 1);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 1, 2, 3, 4, 5, 6, 7}), 4);
  // Only the CPUs of the affinity mask count.
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 4}), 1);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 1, 4, 5}), 2);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {}), 0);
}

TEST(CpuFeaturesTest, CoreIdsRepeatAcrossDies) {
  FakeTopology topo;
  topo.AddCpu(0, 0, 0, 0);
  topo.AddCpu(1, 0, 1, 0);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 1}), 2);
}

TEST(CpuFeaturesTest, NoDieIdMeansOneDie) {
  FakeTopology topo;  // Kernels before 5.3.
  topo.AddCpu(0, 0, -1, 0);
  topo.AddCpu(1, 0, -1, 1);
  topo.AddCpu(2, 0, -1, 0);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 1, 2}), 2);
}

TEST(CpuFeaturesTest, UnreadableTopologyIsZero) {
  FakeTopology topo;
  topo.AddCpu(0, 0, 0, 0);
  EXPECT_EQ(CountPhysicalCores(topo.dir(), {0, 1}), 0);
  EXPECT_EQ(CountPhysicalCores(topo.dir() + "/missing", {0}), 0);
}

}  // namespace
}  // namespace waste::kernels
