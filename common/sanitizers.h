// Which sanitizer a binary was built with (GCC defines __SANITIZE_*__, clang has
// __has_feature). ASan and TSan replace glibc's malloc (mallopt does nothing) and slow code
// down: the coordinator names the allocator it runs (common/heap_reserve.h), and tests that a
// sanitizer changes skip with a printed reason (tests/testing/sanitizers.h).
#ifndef SLURM_DDP_COMMON_SANITIZERS_H_
#define SLURM_DDP_COMMON_SANITIZERS_H_

namespace ddp {

#if defined(__has_feature)
#define DDP_HAS_FEATURE(x) __has_feature(x)
#else
#define DDP_HAS_FEATURE(x) 0
#endif

inline constexpr bool kUnderAsan =
#if defined(__SANITIZE_ADDRESS__) || DDP_HAS_FEATURE(address_sanitizer)
    true;
#else
    false;
#endif

inline constexpr bool kUnderTsan =
#if defined(__SANITIZE_THREAD__) || DDP_HAS_FEATURE(thread_sanitizer)
    true;
#else
    false;
#endif

// ASan or TSan.
inline constexpr bool kUnderSanitizer = kUnderAsan || kUnderTsan;

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_SANITIZERS_H_
