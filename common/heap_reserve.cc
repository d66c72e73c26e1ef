#include "common/heap_reserve.h"

#include <dlfcn.h>
#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerMalloc = true;
#else
constexpr bool kSanitizerMalloc = false;
#endif
#else
constexpr bool kSanitizerMalloc = false;
#endif

}  // namespace

std::string AllocatorName() {
  if (kSanitizerMalloc) return "a sanitizer's malloc";
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
