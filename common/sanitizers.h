// Which sanitizer a binary was built with (GCC defines __SANITIZE_*__, clang has
// __has_feature). ASan and TSan replace glibc's malloc (mallopt does nothing) and slow code
// down: the coordinator names the allocator it runs (common/heap_reserve.h), and tests that a
// sanitizer changes skip with a printed reason (tests/testing/sanitizers.h).
#ifndef SLURM_DDP_COMMON_SANITIZERS_H_
#define SLURM_DDP_COMMON_SANITIZERS_H_

namespace ddp {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
#else
inline constexpr bool kUnderAsan = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kUnderTsan = true;
#else
inline constexpr bool kUnderTsan = false;
#endif
#else
inline constexpr bool kUnderTsan = false;
#endif

// ASan or TSan.
inline constexpr bool kUnderSanitizer = kUnderAsan || kUnderTsan;

}  // namespace ddp

#endif  // SLURM_DDP_COMMON_SANITIZERS_H_
