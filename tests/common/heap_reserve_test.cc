// ReserveHeap changes the process's allocator for good, so each case runs in a child process
// (a death test that must exit 0).
#include "common/heap_reserve.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/sanitizers.h"

namespace ddp {
namespace {

// Sanitizers replace glibc's malloc, so mallopt and the reserve do nothing there.
using ::ddp::testing::kUnderSanitizer;

size_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

// Allocates `bytes` in 4 KiB blocks on a new thread (gRPC's threads allocate, not main) and
// writes every block; returns how much the resident set grew meanwhile.
size_t GrowthOfThreadAllocations(size_t bytes) {
  const size_t before = ResidentBytes();
  std::vector<void*> blocks;
  std::thread t([&] {
    for (size_t done = 0; done < bytes; done += 4096) {
      auto* p = static_cast<volatile char*>(std::malloc(4000));
      for (size_t i = 0; i < 4000; i += 512) p[i] = 1;
      blocks.push_back(const_cast<char*>(p));
    }
  });
  t.join();
  const size_t after = ResidentBytes();
  for (void* p : blocks) std::free(p);
  return after > before ? after - before : 0;
}

constexpr size_t kMiB = size_t{1} << 20;

TEST(HeapReserveDeathTest, ReservedPagesAreResidentAndReusedByOtherThreads) {
  if (kUnderSanitizer)
    GTEST_SKIP() << "a sanitizer's allocator replaces glibc's; the regular build runs it";
  EXPECT_EXIT(
      {
        const size_t before = ResidentBytes();
        ReserveHeap(96 * kMiB);
        const size_t reserved = ResidentBytes() - before;
        if (reserved < 90 * kMiB) {
          std::fprintf(stderr, "resident set grew by %zu MiB, not 96\n", reserved / kMiB);
          std::exit(1);
        }
        const size_t growth = GrowthOfThreadAllocations(64 * kMiB);
        if (growth > 8 * kMiB) {
          std::fprintf(stderr, "64 MiB on a thread grew the resident set by %zu MiB\n",
                       growth / kMiB);
          std::exit(2);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// The comparison that makes the case above meaningful: without a reserve the same allocations
// fault in new pages.
TEST(HeapReserveDeathTest, WithoutAReserveThreadAllocationsGrowTheResidentSet) {
  EXPECT_EXIT(
      {
        const size_t growth = GrowthOfThreadAllocations(64 * kMiB);
        std::exit(growth >= 48 * kMiB ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ddp
