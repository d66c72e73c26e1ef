#include "coordinator/job/failure_causes.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(FailureCausesTest, WorkerOutcomeKindComesFromTheStatusCode) {
  struct Case {
    absl::Status outcome;
    FailureKind want;
  };
  const std::vector<Case> cases = {
      {absl::UnavailableError("Connection reset by peer"), FailureKind::kCollectiveError},
      {absl::DeadlineExceededError("allreduce timed out"), FailureKind::kCollectiveError},
      // The text says "timed out" but the code says it is the worker's own error: the code wins.
      {absl::InternalError("read timed out: Connection reset"), FailureKind::kWorkerError},
      {absl::InvalidArgumentError("bad image"), FailureKind::kWorkerError},
      {absl::DataLossError("corrupt checkpoint"), FailureKind::kWorkerError},
      {absl::UnknownError("worker failed"), FailureKind::kWorkerError},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KindOfWorkerOutcome(c.outcome), c.want) << c.outcome;
    FailureCause cause = CauseOfWorkerOutcome(4, "rank 4 (host h)", c.outcome);
    EXPECT_EQ(cause.rank, 4);
    EXPECT_EQ(cause.kind, c.want);
    EXPECT_EQ(cause.text, absl::StrCat("rank 4 (host h) failed: ", c.outcome.message()));
  }
}

TEST(FailureCausesTest, LostWorkerKindFromSignalOrExitCode) {
  struct Case {
    int rank;
    LostWorker lost;
    FailureKind want_kind;
    const char* want_text;
  };
  const std::vector<Case> cases = {
      {3,
       {1, 1, 13, "killed by signal 9", 9, 0},
       FailureKind::kSignal,
       "rank 3 (h) killed by signal 9"},
      {3,
       {1, 1, 13, "exited with code 7", 0, 7},
       FailureKind::kExitCode,
       "rank 3 (h) exited with code 7"},
      {-1,
       {0, 0, 10, "killed by signal 11", 11, 0},
       FailureKind::kSignal,
       "rank 3 (h) killed by signal 11 during registration"},
  };
  for (const Case& c : cases) {
    FailureCause cause = CauseOfLostWorker(c.rank, "rank 3 (h)", c.lost);
    EXPECT_EQ(cause.rank, c.rank) << c.want_text;
    EXPECT_EQ(cause.kind, c.want_kind) << c.want_text;
    EXPECT_EQ(cause.text, c.want_text);
  }
}

TEST(FailureCausesTest, JobWideCausesNameNoRank) {
  FailureCause t = CauseOfRegistrationTimeout(absl::Seconds(30), "1 of 2 workers registered");
  EXPECT_EQ(t.rank, -1);
  EXPECT_EQ(t.kind, FailureKind::kRegistrationTimeout);
  EXPECT_EQ(t.text, "registration timed out after 30s: 1 of 2 workers registered");
  FailureCause op = CauseOfOperatorStop("bad lr");
  EXPECT_EQ(op.rank, -1);
  EXPECT_EQ(op.kind, FailureKind::kOperatorStop);
  EXPECT_EQ(op.text, "stopped by operator: bad lr");
  FailureCause silent =
      CauseOfSilence(2, "rank 2 (h)", absl::Milliseconds(10500), absl::Seconds(10));
  EXPECT_EQ(silent.rank, 2);
  EXPECT_EQ(silent.kind, FailureKind::kLostHeartbeat);
  EXPECT_EQ(silent.text, "rank 2 (h) lost: no heartbeat for 10.5s (timeout 10s)");
}

TEST(FailureCausesTest, RootCauseNamesTheDeadRankAndKeepsTheEarlierReport) {
  FailureCause earlier{0, FailureKind::kCollectiveError, "rank 0 failed: reset"};
  FailureCause death{1, FailureKind::kSignal, "rank 1 killed by signal 9"};
  FailureCause root = RootCause(death, earlier);
  EXPECT_EQ(root.rank, 1);
  EXPECT_EQ(root.kind, FailureKind::kSignal);
  EXPECT_EQ(root.text, "rank 1 killed by signal 9; then rank 0 failed: reset");
}

}  // namespace
}  // namespace ddp
