// Heap made resident before it is needed, so that a burst of allocations on the critical path
// reuses pages instead of faulting in new ones.
//
// The rendezvous is such a burst: the coordinator holds every worker's Register call at once
// (~20 KB of gRPC state each, on top of ~30 KB per connection), and a load generator's agent
// holds thousands of simulated ranks' calls. Every new page is a fault the kernel zeroes; on a
// virtual machine the first touch of a page the guest has not used for a while costs several
// times more again (the host backs it anew: ~14 µs against ~1.5-2 µs for a page freed moments
// ago on the benchmark machine, docs/bench-status.md). ReserveHeap pays that while nothing waits.
//
// It makes every thread allocate from glibc's main arena (M_ARENA_MAX 1: per-thread arenas
// would each need their own resident pages), which then never gives memory back to the kernel
// (no trimming; blocks under 32 MiB come from the heap, not from mmap), and touches and frees
// `bytes` of it. Call it first in main, before any thread starts. Not thread-safe.
//
// ddp-coordinator links tcmalloc instead (coordinator/CMakeLists.txt). There the mallopt calls do
// nothing, and the freed blocks go to tcmalloc's page heap, which hands them out again (it
// returns free pages to the kernel only slowly); the reserve still shortened the 16,384-rank
// rendezvous (docs/bench-status.md).
#ifndef SLURM_DDP_COMMON_HEAP_RESERVE_H_
#define SLURM_DDP_COMMON_HEAP_RESERVE_H_

#include <cstddef>
#include <string>

namespace ddp {

// Returns the seconds it took. 0 bytes: does nothing (the allocator keeps glibc's defaults).
double ReserveHeap(size_t bytes);

// The process's malloc, for its log: "tcmalloc 2.10" when gperftools' tcmalloc replaced it,
// "a sanitizer's malloc" in an ASan or TSan build, else "glibc malloc".
std::string AllocatorName();

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_HEAP_RESERVE_H_
