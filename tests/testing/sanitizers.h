// Which sanitizer a test binary was built with (GCC defines __SANITIZE_*__, clang has
// __has_feature), for tests that must skip, with a printed reason, where one changes what they
// measure: ASan and TSan replace glibc's malloc (mallopt does nothing) and slow code down.
#ifndef SLURM_DDP_TESTS_TESTING_SANITIZERS_H_
#define SLURM_DDP_TESTS_TESTING_SANITIZERS_H_

namespace ddp::testing {

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

}  // namespace ddp::testing

#endif  // SLURM_DDP_TESTS_TESTING_SANITIZERS_H_
