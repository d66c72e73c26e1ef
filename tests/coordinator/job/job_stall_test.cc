// The Job's stall detection and its stop deadline, driven by a fake clock (the rule itself is
// table-tested in stall_rule_test.cc).
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "coordinator/job/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

ProgressReport Progress(int64_t step, StepPhase phase, double phase_seconds,
                        WorkerPhase worker = WorkerPhase::kTraining) {
  ProgressReport p;
  p.phase = worker;
  p.step = step;
  p.epochs = 1;
  p.steps_per_epoch = 100;
  p.step_phase = phase;
  p.phase_seconds = phase_seconds;
  return p;
}

class JobStallTest : public ::testing::Test {
 protected:
  // Two ranks (rank r is pid r + 1), registered and running.
  std::unique_ptr<Job> MakeJob(absl::Duration stall_timeout, absl::Duration stop_timeout,
                               absl::Duration suspend_threshold = absl::InfiniteDuration(),
                               int max_restarts = 0) {
    JobConfig c;
    c.max_restarts = max_restarts;
    c.job_id = "j";
    c.world_size = 2;
    c.heartbeat_timeout = absl::Seconds(10);
    c.stall.timeout = stall_timeout;
    c.stop_timeout = stop_timeout;
    c.suspend_threshold = suspend_threshold;
    auto job = std::make_unique<Job>(c, &clock_);
    for (int r = 0; r < 2; ++r) {
      WorkerIdentity w;
      w.host = absl::StrCat("host", r);
      w.node_rank = r;
      w.pid = r + 1;
      job->Register(w, [](absl::StatusOr<RankAssignment>) {});
    }
    EXPECT_EQ(job->Status().state, JobState::kRunning);
    return job;
  }

  // Both ranks heartbeat once a second for `seconds`, the clock moving with them; `beat(rank, t)`
  // gives rank's report at t seconds into the run. Returns the last replies.
  std::vector<HeartbeatReply> Run(Job& job, int seconds,
                                  const std::function<ProgressReport(int, double)>& beat) {
    std::vector<HeartbeatReply> replies(2);
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(absl::Seconds(1));
      elapsed_ += 1;
      for (int r = 0; r < 2; ++r) {
        auto reply = job.Heartbeat(r, pids_[r], beat(r, elapsed_));
        EXPECT_TRUE(reply.ok()) << reply.status();
        if (reply.ok()) replies[static_cast<size_t>(r)] = *reply;
      }
      job.Tick();
    }
    return replies;
  }

  // From now on: rank 0 waits in allreduce, rank 1 sits in data (both at step 10). Keep the one
  // function for the whole hang: its phase time counts from when it was made.
  std::function<ProgressReport(int, double)> DataHang() {
    const double since = elapsed_;
    return [since](int rank, double t) {
      return Progress(10, rank == 0 ? StepPhase::kAllreduce : StepPhase::kData, t - since);
    };
  }

  FakeClock clock_;
  double elapsed_ = 0;
  int pids_[2] = {1, 2};  // by rank: who Run() heartbeats as
};

TEST_F(JobStallTest, ADataHangFailsTheJobNamingTheRankAndItsPhase) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60));
  const auto hang = DataHang();
  Run(*job, 5, hang);
  EXPECT_EQ(job->Status().state, JobState::kRunning) << "still within the 5 s budget";
  EXPECT_FALSE(job->Status().stall.present());
  const std::vector<HeartbeatReply> replies = Run(*job, 2, hang);

  const JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kStall);
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_THAT(s.failure.text, HasSubstr("rank 1 (host host1"));
  EXPECT_THAT(s.failure.text, HasSubstr("stalled in data for 6"));
  EXPECT_THAT(s.failure.text, HasSubstr("peers: 1 in allreduce"));
  EXPECT_EQ(s.ranks[1].state, RankState::kStalled);
  EXPECT_EQ(s.ranks[0].state, RankState::kTraining);
  ASSERT_TRUE(s.stall.present());
  EXPECT_EQ(s.stall.rank, 1);
  EXPECT_EQ(s.stall.phase, StepPhase::kData);
  EXPECT_GT(s.stall.seconds, 5);
  EXPECT_EQ(s.stall.budget_seconds, 5);
  ASSERT_EQ(s.stall.peers.size(), 1u);
  EXPECT_EQ(s.stall.peers[0].phase, StepPhase::kAllreduce);
  EXPECT_EQ(s.stall.peers[0].ranks, 1);
  // Every rank is told to abort, with the typed cause naming rank 1.
  for (const HeartbeatReply& reply : replies) {
    EXPECT_EQ(reply.command, Command::kAbort);
    EXPECT_EQ(reply.cause.kind, FailureKind::kStall);
    EXPECT_EQ(reply.cause.rank, 1);
  }
  EXPECT_THAT(ToJson(s), HasSubstr("\"stall\":{\"rank\":1,\"phase\":\"data\""));
  EXPECT_THAT(ToJson(s), HasSubstr("\"peers\":{\"allreduce\":1}"));
  EXPECT_EQ(job->ExitCode(), kExitFailed);
}

TEST_F(JobStallTest, ARankThatMovesOnBeforeTheBudgetIsNeverStalled) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60));
  Run(*job, 4, DataHang());
  // The data arrives: both ranks step on, each step well within the budget.
  Run(*job, 20, [](int, double t) {
    return Progress(10 + static_cast<int64_t>(t), StepPhase::kForward, 0.1);
  });
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_FALSE(s.stall.present());
  EXPECT_THAT(ToJson(s), ::testing::Not(HasSubstr("\"stall\"")));
}

TEST_F(JobStallTest, TheDefaultBudgetIsDerivedFromTheJobsPace) {
  auto job = MakeJob(absl::ZeroDuration(), absl::InfiniteDuration());
  // 10 steps a second for 30 s: median 0.1 s, budget max(60 s, 2 s) = 60 s.
  Run(*job, 30, [](int, double t) {
    return Progress(static_cast<int64_t>(10 * t), StepPhase::kBackward, 0.05);
  });
  const auto hang = DataHang();
  Run(*job, 58, hang);
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  Run(*job, 4, hang);
  EXPECT_EQ(job->Status().state, JobState::kFailed);
  EXPECT_EQ(job->Status().stall.budget_seconds, 60);
}

TEST_F(JobStallTest, AFirstStepHasTenTimesTheBudget) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(600));
  auto first_step = [](int rank, double t) {
    return Progress(0, rank == 0 ? StepPhase::kAllreduce : StepPhase::kForward, t,
                    WorkerPhase::kStarting);
  };
  Run(*job, 45, first_step);
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  Run(*job, 7, first_step);
  EXPECT_EQ(job->Status().state, JobState::kFailed);
  EXPECT_EQ(job->Status().stall.budget_seconds, 50);
}

TEST_F(JobStallTest, TimeTheCoordinatorWasNotRunningIsNotAStall) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60), /*suspend_threshold=*/absl::Seconds(2));
  const auto hang = DataHang();
  Run(*job, 2, hang);
  // The whole job is suspended for 30 s (no ticks); the ranks' phase clocks ran on.
  clock_.Advance(absl::Seconds(30));
  elapsed_ += 30;
  Run(*job, 4, hang);
  EXPECT_EQ(job->Status().state, JobState::kRunning) << "30 s of suspension counted as a stall";
  Run(*job, 3, hang);
  EXPECT_EQ(job->Status().state, JobState::kFailed);
}

TEST_F(JobStallTest, AStopSignalOnAWorkerStartsAGracefulStop) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60));
  ProgressReport p = Progress(3, StepPhase::kForward, 0.1);
  p.stop_signaled = true;
  auto reply = job->Heartbeat(1, 2, p);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->command, Command::kCheckpointAndStop);
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopping);
  EXPECT_THAT(s.stop_reason, HasSubstr("rank 1 (host host1"));
  EXPECT_THAT(s.stop_reason, HasSubstr("received a stop signal"));
}

TEST_F(JobStallTest, AnOverdueStopWithACheckpointEndsStoppedAndTellsRanksToExitResumable) {
  auto job = MakeJob(absl::Seconds(600), absl::Seconds(20));
  Run(*job, 2, [](int, double) { return Progress(10, StepPhase::kForward, 0.1); });
  ASSERT_TRUE(job->CommitCheckpoint(0, 1, {0, 10, 320, "ck/step10.pt"}).ok());
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "operator request").ok());
  Run(*job, 19, DataHang());
  EXPECT_EQ(job->Status().state, JobState::kStopping);
  // Past 20 s at the third tick; the replies after it say exit.
  const std::vector<HeartbeatReply> replies = Run(*job, 3, DataHang());

  const JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kStopped);
  EXPECT_THAT(s.stop_reason, HasSubstr("operator request; graceful stop not completed within 20s"));
  EXPECT_THAT(s.stop_reason, HasSubstr("rank 1 (host host1"));
  EXPECT_THAT(s.stop_reason, HasSubstr("stuck in data"));
  EXPECT_THAT(s.stop_reason, HasSubstr("resumable from the checkpoint of step 10"));
  ASSERT_TRUE(s.stall.present());
  EXPECT_EQ(s.stall.rank, 1);
  EXPECT_EQ(s.ranks[1].state, RankState::kStalled);
  EXPECT_EQ(job->ExitCode(), kExitResumable);
  for (const HeartbeatReply& reply : replies) {
    EXPECT_EQ(reply.command, Command::kExit);
    EXPECT_EQ(reply.exit_code, kExitResumable);
    EXPECT_THAT(reply.reason, HasSubstr("stuck in data"));
  }
}

TEST_F(JobStallTest, AnOverdueStopWithoutACheckpointFailsNamingTheStuckRank) {
  auto job = MakeJob(absl::Seconds(600), absl::Seconds(20));
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "operator request").ok());
  const std::vector<HeartbeatReply> replies = Run(*job, 22, DataHang());
  const JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kStall);
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_THAT(s.failure.text, HasSubstr("graceful stop not completed within 20s"));
  EXPECT_THAT(s.failure.text, HasSubstr("no checkpoint to resume from"));
  EXPECT_EQ(job->ExitCode(), kExitFailed);
  for (const HeartbeatReply& reply : replies) {
    EXPECT_EQ(reply.command, Command::kExit);
    EXPECT_EQ(reply.exit_code, kExitFailed);
    EXPECT_EQ(reply.cause.rank, 1);
  }
}

TEST_F(JobStallTest, AStallDuringAStopEndsTheStopAtOnce) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60));
  ASSERT_TRUE(job->CommitCheckpoint(0, 1, {0, 10, 320, "ck/step10.pt"}).ok());
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "SIGUSR1").ok());
  Run(*job, 7, DataHang());
  const JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kStopped);
  EXPECT_THAT(s.stop_reason, HasSubstr("graceful stop cannot complete"));
  EXPECT_THAT(s.stop_reason, HasSubstr("rank 1 (host host1"));
  EXPECT_EQ(job->ExitCode(), kExitResumable);
}

TEST_F(JobStallTest, AStopThatCompletesInTimeIsNotTouched) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(20));
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "operator request").ok());
  Run(*job, 3, [](int, double) { return Progress(10, StepPhase::kCheckpoint, 0.5); });
  ASSERT_TRUE(job->ReportDone(0, 1, absl::CancelledError("stopped")).ok());
  ASSERT_TRUE(job->ReportDone(1, 2, absl::CancelledError("stopped")).ok());
  clock_.Advance(absl::Seconds(30));
  job->Tick();
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopped);
  EXPECT_EQ(s.stop_reason, "operator request");
  EXPECT_FALSE(s.stall.present());
}

TEST_F(JobStallTest, WithARestartLeftOnlyTheStalledRankIsToldToExitAndIsReplaced) {
  auto job = MakeJob(absl::Seconds(5), absl::Seconds(60), absl::InfiniteDuration(),
                     /*max_restarts=*/1);
  const auto hang = DataHang();
  std::vector<HeartbeatReply> replies = Run(*job, 7, hang);

  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning) << "a restart is left: the job does not fail";
  ASSERT_TRUE(s.stall.present());
  EXPECT_EQ(s.stall.rank, 1);
  EXPECT_EQ(s.restarts, 0) << "the restart is used when the launcher reports the worker's end";
  EXPECT_EQ(replies[0].command, Command::kContinue);
  EXPECT_EQ(replies[1].command, Command::kExit);
  EXPECT_EQ(replies[1].exit_code, kExitFailed);
  EXPECT_THAT(replies[1].reason, HasSubstr("stalled in data"));
  EXPECT_THAT(absl::StrJoin(s.events, "\n"), HasSubstr("told to exit (stalled)"));

  // Its launcher sees it exit and reports it: the job recovers, the worker is started again.
  auto lost = job->ReportLost(LostWorker{1, 0, 2, "exited with code 1", 0, kExitFailed});
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->action, LostAction::kRespawn);
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.restarts, 1);
  ASSERT_EQ(s.lost_ranks.size(), 1u);
  EXPECT_EQ(s.lost_ranks[0].cause.rank, 1);

  RejoinRequest rejoin;
  rejoin.committed_step = 10;
  rejoin.reason = "Connection reset by peer";
  absl::Status survivor = absl::UnknownError("no reply");
  job->Rejoin(0, 1, rejoin, [&](absl::StatusOr<RankAssignment> r) { survivor = r.status(); });
  WorkerIdentity replacement;
  replacement.host = "host1";
  replacement.node_rank = 1;
  replacement.pid = 3;
  absl::StatusOr<RankAssignment> joined = absl::UnknownError("no reply");
  job->Register(replacement, [&](absl::StatusOr<RankAssignment> r) { joined = std::move(r); });
  EXPECT_TRUE(survivor.ok()) << survivor;
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->rank, 1);
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.membership_generation, 1);
  EXPECT_FALSE(s.stall.present()) << "the new generation starts unjudged";
  auto beat = job->Heartbeat(1, 3, Progress(10, StepPhase::kForward, 0));
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->command, Command::kContinue) << "the replacement is not told to exit";
  pids_[1] = 3;

  // No restart left: the next stall fails the job, naming the rank.
  replies = Run(*job, 7, DataHang());
  s = job->Status();
  ASSERT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kStall);
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_EQ(replies[1].command, Command::kAbort);
}

}  // namespace
}  // namespace ddp
