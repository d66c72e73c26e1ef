// A TSan build's premise, checked: the abseil this process loaded is the TSan-built one
// (scripts/build-tsan-abseil.sh, DDP_TSAN_ABSEIL_DIR), so TSan sees absl::Mutex. Race-free code
// that guards a counter with absl::Mutex then draws no report (with Debian's uninstrumented
// abseil it would), while a real race still does. Built only when DDP_SANITIZE=thread.
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace {

// The path of the loaded libabsl_synchronization, from /proc/self/maps ("" if not loaded).
std::string LoadedAbslSynchronization() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t at = line.find('/');
    if (at != std::string::npos && line.find("libabsl_synchronization.so") != std::string::npos) {
      return line.substr(at);
    }
  }
  return "";
}

TEST(TsanAbseil, TheTsanBuiltAbseilIsLoaded) {
  const std::string loaded = LoadedAbslSynchronization();
  ASSERT_FALSE(loaded.empty()) << "libabsl_synchronization is not loaded";
  EXPECT_EQ(loaded.rfind(DDP_TSAN_ABSEIL_DIR "/", 0), 0u)
      << "loaded " << loaded << ", want the one in " << DDP_TSAN_ABSEIL_DIR;
}

// Four threads add to one counter under an absl::Mutex: TSan (halt_on_error) would end the test
// here if it could not see the mutex.
TEST(TsanAbseil, MutexGuardedCounterIsNoRace) {
  absl::Mutex mu;
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        absl::MutexLock lock(&mu);
        ++counter;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, 40000);
}

// The same counter without the lock is a race that TSan reports (and ends the process for).
void RacyCounter() {
  long counter = 0;
  std::thread a([&] {
    for (int i = 0; i < 10000; ++i) ++counter;
  });
  std::thread b([&] {
    for (int i = 0; i < 10000; ++i) ++counter;
  });
  a.join();
  b.join();
  std::exit(counter >= 0 ? 0 : 1);
}

TEST(TsanAbseilDeathTest, ARealRaceIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(RacyCounter(), ::testing::ExitedWithCode(66), "ThreadSanitizer: data race");
}

}  // namespace
