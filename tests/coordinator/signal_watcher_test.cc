#include "coordinator/signal_watcher.h"

#include <signal.h>
#include <unistd.h>

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

// Real signals sent to this process arrive, in order, on the watcher's thread; the destructor
// returns (the thread is joined) even while no signal comes.
TEST(SignalWatcherTest, DeliversRealSignalsAndJoinsOnDestruction) {
  absl::Mutex mu;
  std::vector<int> got;
  std::thread::id main_thread = std::this_thread::get_id();
  bool other_thread = true;
  {
    auto watcher = SignalWatcher::Start({SIGUSR1, SIGUSR2}, [&](int sig) {
      absl::MutexLock lock(&mu);
      got.push_back(sig);
      other_thread = other_thread && std::this_thread::get_id() != main_thread;
    });
    ASSERT_TRUE(watcher.ok()) << watcher.status();
    ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
    {
      absl::MutexLock lock(&mu);
      auto one = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return got.size() >= 1; };
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one), absl::Seconds(5)));
    }
    ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
    absl::MutexLock lock(&mu);
    auto two = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return got.size() >= 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(5)));
  }
  const absl::Time start = absl::Now();
  {
    auto idle = SignalWatcher::Start({SIGUSR1}, [](int) {});
    ASSERT_TRUE(idle.ok());
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(1)) << "destruction must not wait for a signal";
  absl::MutexLock lock(&mu);
  EXPECT_EQ(got, (std::vector<int>{SIGUSR1, SIGUSR2}));
  EXPECT_TRUE(other_thread);
}

}  // namespace
}  // namespace ddp
