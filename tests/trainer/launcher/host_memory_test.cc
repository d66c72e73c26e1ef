#include "trainer/launcher/host_memory.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/sanitizers.h"

namespace ddp {
namespace {

// AddressSanitizer and ThreadSanitizer replace malloc with their own allocators, which ignore
// mallopt: the policy under test cannot take effect there.
using ::ddp::testing::kUnderSanitizer;

long MinorFaults() {
  rusage u = {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// One "training step": 48 blocks of 1 MiB allocated, written and freed, as a step's tensors.
constexpr int kBlocks = 48;
constexpr size_t kBlockBytes = 1 << 20;
void Step() {
  std::vector<char*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    auto* p = static_cast<char*>(std::malloc(kBlockBytes));
    ASSERT_NE(p, nullptr);
    std::memset(p, i, kBlockBytes);
    asm volatile("" : : "r"(p) : "memory");  // keep the writes
    blocks.push_back(p);
  }
  for (char* p : blocks) std::free(p);
}

TEST(HostMemoryTest, EnvironmentSettingsWin) {
  setenv("MALLOC_TRIM_THRESHOLD_", "1000000", 1);
  EXPECT_NE(TuneHostAllocator().find("from the environment"), std::string::npos);
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1);
  EXPECT_NE(TuneHostAllocator().find("from the environment"), std::string::npos);
  unsetenv("GLIBC_TUNABLES");
}

// Without the policy, glibc trims the freed 48 MiB off the heap after every step and each step
// faults all of it back in (about 12,000 faults of 4 KiB pages); with it, a step reuses the
// memory of the step before.
TEST(HostMemoryTest, LaterStepsReuseFreedMemoryWithoutPageFaults) {
  if (std::getenv("GLIBC_TUNABLES") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      std::getenv("MALLOC_MMAP_THRESHOLD_")) {
    GTEST_SKIP() << "malloc tunables set in the environment of this test";
  }
  if (kUnderSanitizer) {
    GTEST_SKIP() << "a sanitizer's allocator ignores mallopt, so glibc's heap policy cannot be "
                    "measured in an ASan or TSan build";
  }
  EXPECT_NE(TuneHostAllocator().find("never trimmed"), std::string::npos);
  Step();
  Step();
  const long before = MinorFaults();
  Step();
  const long faults = MinorFaults() - before;
  const long pages = kBlocks * static_cast<long>(kBlockBytes) / 4096;
  EXPECT_LT(faults, pages / 20) << faults << " page faults in a step of " << pages << " pages";
}

}  // namespace
}  // namespace ddp
