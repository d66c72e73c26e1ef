#include "common/heap_reserve.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>
#include <vector>

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

}  // namespace ddp
