// Host (CPU) memory policy for training processes.
//
// A training step allocates and frees the same large tensors (activations, gradients, temporary
// buffers) every step. glibc's malloc, left to itself, serves blocks above its mmap threshold with
// fresh mmap()s and trims the top of the heap when a step's tensors are freed, so the next step
// page-faults the same memory back in, and the kernel zeroes every page again. On a CPU ResNet-18
// step that is tens of thousands of page faults per rank. TuneHostAllocator() makes freed memory
// stay in the process for reuse (as PyTorch's CUDA caching allocator does on the GPU): blocks up
// to 32 MiB come from the heap, and the heap is never trimmed.
#ifndef DDP_TRAINER_LAUNCHER_HOST_MEMORY_H_
#define DDP_TRAINER_LAUNCHER_HOST_MEMORY_H_

#include <string>

namespace ddp {

// Applies the policy above, unless the environment already sets glibc's malloc thresholds
// (GLIBC_TUNABLES with glibc.malloc.mmap_threshold / trim_threshold, or MALLOC_MMAP_THRESHOLD_ /
// MALLOC_TRIM_THRESHOLD_): the user's choice wins. Returns what it did, in one line, for the log.
std::string TuneHostAllocator();

}  // namespace ddp

#endif  // DDP_TRAINER_LAUNCHER_HOST_MEMORY_H_
