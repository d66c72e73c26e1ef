// WaitForWork: a failed collective comes back typed — a timeout as CollectiveTimeoutError (from
// NCCL's error type, or a failure after the group's timeout), anything else as a c10
// distributed error — never decided by the message.
#include "trainer/ddp/dist_errors.h"

#include <chrono>
#include <stdexcept>

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

}  // namespace
}  // namespace ddp
