#include "common/heap_reserve.h"

#include <dlfcn.h>
#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/sanitizers.h"

namespace ddp {

double ReserveHeap(size_t bytes) {
  if (bytes == 0) return 0;  // the allocator is left as it is
  const absl::Time start = absl::Now();
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  constexpr size_t kBlock = 256 << 10;
  constexpr size_t kPage = 4096;
  std::vector<void*> blocks;
  blocks.reserve(bytes / kBlock + 1);
  for (size_t done = 0; done < bytes; done += kBlock) {
    void* p = std::malloc(kBlock);
    if (p == nullptr) break;
    // Volatile: a store to memory that is freed unread is otherwise dropped by the compiler.
    volatile char* page = static_cast<volatile char*>(p);
    for (size_t i = 0; i < kBlock; i += kPage) page[i] = 0;
    blocks.push_back(p);
  }
  // Freed top-down, the blocks merge into the heap's top chunk, resident and reusable.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  return absl::ToDoubleSeconds(absl::Now() - start);
}

std::string AllocatorName() {
  if (kUnderSanitizer) return "a sanitizer's malloc";
  // gperftools exports tc_version; found through the global scope, it is the malloc in use.
  using TcVersion = const char* (*)(int*, int*, const char**);
  auto* tc_version = reinterpret_cast<TcVersion>(dlsym(RTLD_DEFAULT, "tc_version"));
  if (tc_version == nullptr) return "glibc malloc";
  int major = 0, minor = 0;
  const char* patch = nullptr;
  tc_version(&major, &minor, &patch);
  return absl::StrCat("tcmalloc ", major, ".", minor, patch != nullptr ? patch : "");
}

}  // namespace ddp
