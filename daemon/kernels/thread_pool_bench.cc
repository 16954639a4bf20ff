// How long a decode step's worth of small ParallelFor loops takes when the
// pool has its cores to itself, when its threads outnumber the cores they may
// run on, and when busy-looping processes share the machine.
//
//   bazel build --config=opt //daemon/kernels:thread_pool_bench
//   bazel-bin/daemon/kernels/thread_pool_bench [--threads=N] [--loops=200]
//       [--work_us=20] [--steps=50] [--hogs=1] [--scenarios=alone,one,...]
//
// A step is --loops loops, each --work_us of arithmetic (as one thread runs
// it) split into 256 items. Scenarios, each in the same run:
//   one             1 thread (the serial reference)
//   alone           N threads on the process's CPUs (N: --threads, default
//                   the physical cores)
//   oversubscribed  2N threads pinned to N CPUs
//   hog             N threads beside --hogs busy-looping child processes
// The table gives the median and best step time, the time per loop, and the
// speedup over `one`. Run it on an otherwise quiet machine; a contended one
// measures the neighbours.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "daemon/kernels/cpu_features.h"
#include "daemon/kernels/thread_pool.h"

ABSL_FLAG(int, threads, 0, "pool threads N (0: the physical cores)");
ABSL_FLAG(int, loops, 200, "ParallelFor loops per step (a decode step has ~200)");
ABSL_FLAG(double, work_us, 20, "work per loop, microseconds on one thread");
ABSL_FLAG(int, steps, 50, "timed steps per scenario (after 3 untimed)");
ABSL_FLAG(int, hogs, 1, "busy-looping processes in the hog scenario");
ABSL_FLAG(std::string, scenarios, "one,alone,oversubscribed,hog", "comma-separated scenarios");

namespace waste::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kItems = 256;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A dependent multiply-add chain: pure core time, no memory traffic.
__attribute__((noinline)) uint64_t Spin(uint64_t iters, uint64_t x) {
  for (uint64_t i = 0; i < iters; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

std::atomic<uint64_t> sink{0};

double SpinItersPerMicrosecond() {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const uint64_t iters = 1 << 22;
    const Clock::time_point start = Clock::now();
    sink.fetch_add(Spin(iters, rep), std::memory_order_relaxed);
    best = std::max(best, iters / (Seconds(Clock::now() - start) * 1e6));
  }
  return best;
}

// The CPUs of this process's mask.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Restricts this thread (and the pool threads it starts) to `cpus` for the
// life of the object.
class ScopedAffinity {
 public:
  explicit ScopedAffinity(const std::vector<int>& cpus) {
    sched_getaffinity(0, sizeof(saved_), &saved_);
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus) CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
  }
  ~ScopedAffinity() { sched_setaffinity(0, sizeof(saved_), &saved_); }

 private:
  cpu_set_t saved_;
};

// Busy-looping child processes, killed when this goes away. Forked before
// any pool exists, and the child only spins, so forking is safe here.
class Hogs {
 public:
  explicit Hogs(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        volatile uint64_t x = 0;
        while (true) x = x + 1;
      }
      if (pid > 0) pids_.push_back(pid);
      if (pid < 0) std::perror("fork");
    }
  }
  ~Hogs() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

struct Result {
  double median_s = 0;
  double best_s = 0;
};

Result RunSteps(int threads, int loops, uint64_t iters_per_item, int steps) {
  ThreadPool pool(threads);
  std::vector<double> times;
  for (int step = -3; step < steps; ++step) {
    const Clock::time_point start = Clock::now();
    for (int loop = 0; loop < loops; ++loop) {
      pool.ParallelFor(kItems, [&](int64_t b, int64_t e) {
        uint64_t x = b;
        for (int64_t i = b; i < e; ++i) x = Spin(iters_per_item, x);
        sink.fetch_add(x, std::memory_order_relaxed);
      });
    }
    if (step >= 0) times.push_back(Seconds(Clock::now() - start));
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

int Main() {
  const std::vector<int> cpus = AllowedCpus();
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = ThreadPool::DefaultThreads();
  const int loops = std::max(1, absl::GetFlag(FLAGS_loops));
  const int steps = std::max(1, absl::GetFlag(FLAGS_steps));
  const int hogs = std::max(0, absl::GetFlag(FLAGS_hogs));
  const double rate = SpinItersPerMicrosecond();
  const uint64_t iters_per_item =
      std::max<uint64_t>(1, static_cast<uint64_t>(absl::GetFlag(FLAGS_work_us) * rate / kItems));
  std::printf(
      "%zu CPUs in the mask, %d physical cores; N = %d threads; %d loops per step of %.1f us "
      "work each (%d items)\n\n",
      cpus.size(), PhysicalCores(), threads, loops, iters_per_item * kItems / rate,
      static_cast<int>(kItems));
  std::printf("%-16s %7s %5s %5s %12s %12s %10s %8s\n", "scenario", "threads", "cpus", "hogs",
              "median ms", "best ms", "us/loop", "speedup");

  double serial_s = 0;
  const std::vector<std::string> scenarios =
      absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
  for (const std::string& scenario : scenarios) {
    int pool_threads = threads;
    int scenario_cpus = static_cast<int>(cpus.size());
    int scenario_hogs = 0;
    Result r;
    if (scenario == "one") {
      pool_threads = 1;
      r = RunSteps(1, loops, iters_per_item, steps);
      serial_s = r.median_s;
    } else if (scenario == "alone") {
      r = RunSteps(threads, loops, iters_per_item, steps);
    } else if (scenario == "oversubscribed") {
      pool_threads = 2 * threads;
      scenario_cpus = std::min<int>(threads, cpus.size());
      ScopedAffinity affinity(std::vector<int>(cpus.begin(), cpus.begin() + scenario_cpus));
      r = RunSteps(pool_threads, loops, iters_per_item, steps);
    } else if (scenario == "hog") {
      scenario_hogs = hogs;
      Hogs running(hogs);
      r = RunSteps(threads, loops, iters_per_item, steps);
    } else {
      std::fprintf(stderr, "unknown scenario %s (one, alone, oversubscribed, hog)\n",
                   scenario.c_str());
      return 2;
    }
    char speedup[16] = "-";
    if (serial_s > 0) std::snprintf(speedup, sizeof(speedup), "%.2fx", serial_s / r.median_s);
    std::printf("%-16s %7d %5d %5d %12.3f %12.3f %10.1f %8s\n", scenario.c_str(), pool_threads,
                scenario_cpus, scenario_hogs, r.median_s * 1e3, r.best_s * 1e3,
                r.median_s * 1e6 / loops, speedup);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace waste::kernels

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return waste::kernels::Main();
}
