#include "trainer/launcher/host_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace ddp {
namespace {

// glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); larger values
// are refused.
constexpr int kMmapThreshold = 32 << 20;

bool UserSetMallocThresholds() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) return true;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && (std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
                                 std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr);
}

}  // namespace

std::string TuneHostAllocator() {
  if (UserSetMallocThresholds()) return "host malloc: thresholds from the environment, left as set";
  // A fixed threshold also turns off glibc's dynamic adjustment, which would otherwise lower the
  // trim threshold again.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1) {
    return "host malloc: mallopt refused the thresholds, left at glibc's defaults";
  }
  return "host malloc: blocks up to 32 MiB from the heap, heap never trimmed";
}

}  // namespace ddp
