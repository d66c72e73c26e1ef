// WaitForWork: a failed collective comes back typed — a timeout as CollectiveTimeoutError (from
// NCCL's error type, or a failure after the group's timeout), anything else as a c10
// distributed error — never decided by the message. On a Gloo group it waits in slices and gives
// up once the give-up flag is set (CollectiveAbandonedError); a work that completes as a slice runs
// out is judged by its own outcome; other backends are never polled.
#include "trainer/ddp/dist_errors.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/trainer/ddp/fake_backend.h"

namespace ddp {
namespace {

using std::chrono::milliseconds;
using testing::FakeBackend;
using testing::FakeWork;
using Clock = std::chrono::steady_clock;

TEST(WaitForWork, SuccessReturns) {
  FakeBackend pg(milliseconds(1000));
  FakeWork work(nullptr);
  EXPECT_NO_THROW(WaitForWork(work, pg, Clock::now(), "allreduce"));
}

TEST(WaitForWork, AFastForeignFailureIsABackendErrorNotATimeout) {
  FakeBackend pg(milliseconds(60000));
  // The text says "Timed out", as gloo's does; only the elapsed time may decide.
  FakeWork work([] { throw std::runtime_error("Timed out waiting 5ms for recv"); });
  try {
    WaitForWork(work, pg, Clock::now(), "allreduce");
    FAIL() << "no throw";
  } catch (const CollectiveTimeoutError& e) {
    FAIL() << "classified as a timeout: " << e.what();
  } catch (const c10::DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce failed: Timed out waiting"), std::string::npos)
        << e.what();
  }
}

TEST(WaitForWork, AFailureAfterTheGroupTimeoutIsACollectiveTimeout) {
  FakeBackend pg(milliseconds(200));
  FakeWork work([] { throw std::runtime_error("Connection closed by peer"); });
  const auto issued = Clock::now() - milliseconds(250);
  EXPECT_THROW(WaitForWork(work, pg, issued, "allreduce"), CollectiveTimeoutError);
}

TEST(WaitForWork, TheBackendsOwnTimeoutErrorTypeIsACollectiveTimeout) {
  FakeBackend pg(milliseconds(60000));
  pg.error = c10d::ErrorType::TIMEOUT;  // as ProcessGroupNCCL reports after its watchdog fired
  FakeWork work([] { C10_THROW_ERROR(DistBackendError, "NCCL error"); });
  EXPECT_THROW(WaitForWork(work, pg, Clock::now(), "broadcast"), CollectiveTimeoutError);
}

TEST(WaitForWork, ADistributedErrorKeepsItsType) {
  FakeBackend pg(milliseconds(60000));
  FakeWork work([] { C10_THROW_ERROR(DistNetworkError, "reset"); });
  EXPECT_THROW(WaitForWork(work, pg, Clock::now(), "broadcast"), c10::DistNetworkError);
}

TEST(WaitForWork, AnUnknownTimeoutNeverMakesATimeout) {
  FakeBackend pg(milliseconds(0));  // the backend does not say
  FakeWork work([] { throw std::runtime_error("x"); });
  EXPECT_THROW(
      {
        try {
          WaitForWork(work, pg, Clock::now() - std::chrono::hours(1), "allreduce");
        } catch (const CollectiveTimeoutError&) {
          FAIL() << "timeout without a known timeout";
        }
      },
      c10::DistBackendError);
  EXPECT_EQ(CollectiveTimeout(pg).count(), 0);
}

// A Gloo-like work: wait(timeout) sleeps the timeout and throws Work's plain "timed out" error
// while not completed; it completes (successfully) as the `complete_at`-th slice runs out, or
// never when that is 0. Records the timeouts it was waited with.
class SlicedWork : public c10d::Work {
 public:
  explicit SlicedWork(int complete_at) : complete_at_(complete_at) {}
  bool wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    waits.push_back(timeout);
    if (done_) return true;
    lock.unlock();
    std::this_thread::sleep_for(timeout.count() == 0 ? milliseconds(1) : timeout);
    lock.lock();
    if (complete_at_ > 0 && static_cast<int>(waits.size()) >= complete_at_) done_ = true;
    throw c10::Error(c10::SourceLocation{__func__, __FILE__, __LINE__}, "Operation timed out!");
  }
  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  std::vector<milliseconds> waits;

 private:
  std::mutex mu_;
  const int complete_at_;
  bool done_ = false;
};

// Sets the give-up flag for one test and clears it after.
class GiveUpFlag {
 public:
  GiveUpFlag() { SetCollectiveGiveUpFlag(&flag); }
  ~GiveUpFlag() { ClearCollectiveGiveUpFlag(&flag); }
  std::atomic<bool> flag{false};
};

TEST(WaitForWorkGiveUp, AWorkThatCompletesAsASliceRunsOutSucceeds) {
  GiveUpFlag give_up;
  FakeBackend pg(milliseconds(60000));
  pg.name = "gloo";
  SlicedWork work(/*complete_at=*/2);
  // Before the fix, the slice's own "timed out" error was taken for the work's: the step failed.
  EXPECT_NO_THROW(WaitForWork(work, pg, Clock::now(), "DDP: gradient allreduce"));
  ASSERT_GE(work.waits.size(), 2u);
  EXPECT_EQ(work.waits[0], kGiveUpPollInterval);
}

TEST(WaitForWorkGiveUp, AGlooWaitEndsOnceTheFlagIsSet) {
  GiveUpFlag give_up;
  FakeBackend pg(milliseconds(60000));
  pg.name = "gloo";
  SlicedWork work(/*complete_at=*/0);
  std::thread announcer([&give_up] {
    std::this_thread::sleep_for(milliseconds(200));
    give_up.flag.store(true);
  });
  const auto start = Clock::now();
  EXPECT_THROW(WaitForWork(work, pg, start, "DDP: gradient allreduce"), CollectiveAbandonedError);
  const auto took = Clock::now() - start;
  announcer.join();
  EXPECT_GE(took, milliseconds(200));
  EXPECT_LT(took, milliseconds(200) + 3 * kGiveUpPollInterval);
  // Already set: the next wait ends at once, before any slice.
  SlicedWork next(/*complete_at=*/0);
  EXPECT_THROW(WaitForWork(next, pg, Clock::now(), "broadcast"), CollectiveAbandonedError);
  EXPECT_TRUE(next.waits.empty());
}

TEST(WaitForWorkGiveUp, OtherBackendsAreNeverPolled) {
  GiveUpFlag give_up;
  give_up.flag.store(true);
  FakeBackend pg(milliseconds(60000));  // "fake", as NCCL: one wait without a timeout
  FakeWork work(nullptr);
  EXPECT_NO_THROW(WaitForWork(work, pg, Clock::now(), "allreduce"));
}

}  // namespace
}  // namespace ddp
