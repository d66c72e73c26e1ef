// Job's in-job recovery (proto/coordinator.proto, RECOVERY) against a fake clock: a lost worker
// is respawned and the next membership generation forms from the survivors' rejoins and the
// replacement's registration; and the limits: restarts exhausted, a second loss during a
// recovery, the recovery deadline with a replacement that cannot start, a stop during a
// recovery, a rejoin with no loss known, a silent rank that comes back.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/job/recovery_fixture.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(JobRecoveryTest, ALostWorkerIsReplacedAndTheNextGenerationForms) {
  auto job = Running(3);
  auto lost = job->ReportLost(Killed(1, 0, 12));
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->action, LostAction::kRespawn);
  EXPECT_EQ(lost->description, "rank 2 (host host1, node 1, local rank 0, pid 12)");
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.restarts, 1);
  EXPECT_EQ(s.max_restarts, 3);
  ASSERT_EQ(s.lost_ranks.size(), 1u);
  EXPECT_EQ(s.lost_ranks[0].cause.rank, 2);
  EXPECT_EQ(s.lost_ranks[0].cause.kind, FailureKind::kSignal);
  EXPECT_FALSE(s.lost_ranks[0].replaced);
  EXPECT_EQ(s.ranks[2].state, RankState::kLost);
  // Survivors hear of it in their heartbeat replies.
  auto hb = job->Heartbeat(0, 10, {});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->command, Command::kContinue);
  EXPECT_EQ(hb->membership_generation, 1);

  clock_.Advance(absl::Milliseconds(300));
  std::vector<std::shared_ptr<Reply>> replies(4);
  for (int r : {0, 1, 3}) replies[r] = Rejoin(*job, r, r == 1 ? 58 : 57);
  for (int r : {0, 1, 3}) EXPECT_TRUE(Waiting(replies[r])) << "the barrier waits for rank 2";
  clock_.Advance(absl::Milliseconds(900));
  replies[2] = Register(*job, Who(1, 0, 22));
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(replies[r]->ok()) << r << ": " << replies[r]->status();
    const RankAssignment& a = **replies[r];
    EXPECT_EQ(a.rank, r);
    EXPECT_EQ(a.membership_generation, 1);
    EXPECT_EQ(a.store_prefix, "gen0/m1");
    EXPECT_TRUE(a.state_from_peers);
    EXPECT_EQ(a.restarts, 1);
    EXPECT_EQ(a.recovery_cause.rank, 2);
    EXPECT_DOUBLE_EQ(a.recovery_seconds, 1.2);
  }
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.membership_generation, 1);
  EXPECT_DOUBLE_EQ(s.last_recovery_seconds, 1.2);
  EXPECT_TRUE(s.lost_ranks[0].replaced);
  EXPECT_EQ(s.ranks[2].pid, 22);
  EXPECT_EQ(s.ranks[2].state, RankState::kStarting);
  EXPECT_TRUE(job->Heartbeat(2, 22, {}).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(job->Heartbeat(2, 12, {}).status()));
  EXPECT_THAT(s.events.back(), HasSubstr("membership generation 1 complete after 1.2s (rank 2 "
                                         "replaced)"));
  // The next epoch request resumes from the ranks' own position, whatever the last checkpoint.
  ASSERT_TRUE(job->CommitCheckpoint(0, 10, {0, 40, 2560, "/c.pt"}).ok());
  ShardRequest req;
  req.epoch = 0;
  req.dataset_size = 100000;
  req.resume_consumed = 3648;
  req.resume_world_size = 4;
  auto shard = job->GetShard(2, 22, req);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->consumed, 3648);
}

TEST_F(JobRecoveryTest, RestartsExhaustedFailsNamingEveryLostRank) {
  auto job = Running(1);
  ASSERT_EQ(job->ReportLost(Killed(0, 1, 11))->action, LostAction::kRespawn);
  for (int r : {0, 2, 3}) Rejoin(*job, r, 5);
  ASSERT_TRUE(Register(*job, Who(0, 1, 21))->ok());
  clock_.Advance(absl::Seconds(30));
  auto second = job->ReportLost(Killed(1, 1, 13));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->action, LostAction::kStop);
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.rank, 3);
  EXPECT_EQ(s.failure.kind, FailureKind::kSignal);
  EXPECT_THAT(s.failure.text, HasSubstr("rank 3 (host host1, node 1, local rank 1, pid 13) "
                                        "killed by signal 9; restarts exhausted (1 of 1 used)"));
  EXPECT_THAT(s.failure.text, HasSubstr("lost before: rank 1 (host host0, node 0, local rank 1, "
                                        "pid 11) killed by signal 9 at +0.0s"));
  EXPECT_EQ(s.lost_ranks.size(), 2u);
  EXPECT_EQ(job->Heartbeat(0, 10, {})->command, Command::kAbort);
}

TEST_F(JobRecoveryTest, ASecondLossDuringTheRecoveryJoinsIt) {
  auto job = Running(3);
  ASSERT_EQ(job->ReportLost(Killed(0, 0, 10))->action, LostAction::kRespawn);
  auto r1 = Rejoin(*job, 1, 9);
  auto r2 = Rejoin(*job, 2, 9);  // rank 2 rejoins, then dies before the generation is complete
  ASSERT_EQ(job->ReportLost(Killed(1, 0, 12))->action, LostAction::kRespawn);
  EXPECT_TRUE(absl::IsAborted(r2->status())) << "the dead rank's own rejoin is answered";
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.restarts, 2);
  EXPECT_THAT(s.events.back(), HasSubstr("also lost during the recovery: rank 2"));
  auto r3 = Rejoin(*job, 3, 9);
  auto n0 = Register(*job, Who(0, 0, 30));
  EXPECT_TRUE(Waiting(n0));
  auto n2 = Register(*job, Who(1, 0, 32));
  for (const auto& r : {r1, r3, n0, n2}) {
    ASSERT_TRUE(r->ok()) << r->status();
    EXPECT_EQ((*r)->membership_generation, 1);
  }
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_TRUE(s.lost_ranks[0].replaced);
  EXPECT_TRUE(s.lost_ranks[1].replaced);
}

// A worker's Rejoin or Register goes through its node's relay, which may still hold it (or be
// sending it) when the process dies; its task reports the death straight to the coordinator. A
// call that comes after that report must not give the slot to the dead process: the generation
// would form with it, and its replacement (refused: the slot is taken) would wait out the
// deadline (chaos, docs/bench-chaos.md defect 14).
TEST_F(JobRecoveryTest, AWorkerItsTaskSawDieCannotRejoinOrRegisterAfterTheReport) {
  auto job = Running(5);
  ASSERT_EQ(job->ReportLost(Killed(0, 1, 11))->action, LostAction::kRespawn);
  // Rank 0 sent its Rejoin and was killed; the report comes first.
  ASSERT_EQ(job->ReportLost(Killed(0, 0, 10))->action, LostAction::kRespawn);
  auto stale = Rejoin(*job, 0, 9);
  EXPECT_TRUE(absl::IsFailedPrecondition(stale->status())) << stale->status();
  EXPECT_THAT(stale->status().message(), HasSubstr("pid 10 was reported dead by its node's task"));
  auto r2 = Rejoin(*job, 2, 9);
  auto r3 = Rejoin(*job, 3, 9);
  auto n1 = Register(*job, Who(0, 1, 21));
  for (const auto& r : {r2, r3, n1}) EXPECT_TRUE(Waiting(r)) << "slot 0 is vacant";
  EXPECT_EQ(job->Status().state, JobState::kRecovering);
  // Rank 0's replacement dies before its registration arrives: that registration is refused too.
  ASSERT_EQ(job->ReportLost(Killed(0, 0, 20))->action, LostAction::kWait);
  auto dead_start = Register(*job, Who(0, 0, 20));
  EXPECT_TRUE(absl::IsFailedPrecondition(dead_start->status())) << dead_start->status();
  EXPECT_EQ(job->Status().state, JobState::kRecovering);
  auto n0 = Register(*job, Who(0, 0, 30));
  for (const auto& r : {r2, r3, n1, n0}) {
    ASSERT_TRUE(r->ok()) << r->status();
    EXPECT_EQ((*r)->membership_generation, 1);
  }
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.ranks[0].pid, 30);
  EXPECT_EQ(s.ranks[1].pid, 21);
}

TEST_F(JobRecoveryTest, AReplacementThatCannotStartFailsTheJobAtTheDeadline) {
  auto job = Running(3);
  ASSERT_EQ(job->ReportLost(Killed(1, 1, 13))->action, LostAction::kRespawn);
  for (int r : {0, 1, 2}) Rejoin(*job, r, 9);
  // The respawned worker exits at once (a bad environment): not respawned again.
  auto failed_start = job->ReportLost({1, 1, 23, "exited with code 2", 0, 2});
  ASSERT_TRUE(failed_start.ok()) << failed_start.status();
  EXPECT_EQ(failed_start->action, LostAction::kWait);
  EXPECT_EQ(job->Status().restarts, 1);
  // The survivors keep heartbeating while they wait.
  auto beat_and_tick = [&](absl::Duration d) {
    clock_.Advance(d);
    for (int r : {0, 1, 2}) ASSERT_TRUE(job->Heartbeat(r, 10 + r, {}).ok());
    job->Tick();
  };
  beat_and_tick(absl::Seconds(9));
  beat_and_tick(absl::Seconds(10));
  EXPECT_EQ(job->Status().state, JobState::kRecovering);
  beat_and_tick(absl::Seconds(2));
  const JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kRegistrationTimeout);
  EXPECT_THAT(s.failure.text,
              HasSubstr("recovery timed out after 20s: rank 3 (node 1 local rank 1, replacement "
                        "not registered; its start exited with code 2)"));
}

TEST_F(JobRecoveryTest, AStopDuringTheRecoveryTakesEffectAfterIt) {
  auto job = Running(3);
  ASSERT_EQ(job->ReportLost(Killed(0, 1, 11))->action, LostAction::kRespawn);
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "preempted").ok());
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.stop_reason, "preempted");
  EXPECT_EQ(job->Heartbeat(0, 10, {})->command, Command::kCheckpointAndStop);
  for (int r : {0, 2, 3}) Rejoin(*job, r, 9);
  ASSERT_TRUE(Register(*job, Who(0, 1, 21))->ok());
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopping);
  EXPECT_THAT(s.events.back(), HasSubstr("the stop goes on"));
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(job->ReportDone(r, r == 1 ? 21 : 10 + r, absl::CancelledError("stopped")).ok());
  }
  EXPECT_EQ(job->Status().state, JobState::kStopped);
}

// fuzz/regressions/job/stop-signal-during-recovery: a heartbeat's stop signal during a recovery
// announced "job RECOVERING: checkpoint and stop ..." although the state did not change. It is
// kept like an operator's graceful stop there, and the stop begins when the recovery ends.
TEST_F(JobRecoveryTest, AStopSignalDuringTheRecoveryIsNoStateChange) {
  auto job = Running(3);
  ASSERT_EQ(job->ReportLost(Killed(0, 1, 11))->action, LostAction::kRespawn);
  ProgressReport signaled;
  signaled.stop_signaled = true;
  EXPECT_EQ(job->Heartbeat(0, 10, signaled)->command, Command::kCheckpointAndStop);
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_THAT(s.stop_reason, HasSubstr("received a stop signal"));
  EXPECT_THAT(s.events.back(), HasSubstr("checkpoint and stop (after the recovery): rank 0"));
  for (const std::string& e : s.events) EXPECT_THAT(e, Not(HasSubstr("job RECOVERING: check")));
  for (int r : {0, 2, 3}) Rejoin(*job, r, 9);
  ASSERT_TRUE(Register(*job, Who(0, 1, 21))->ok());
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopping);
  EXPECT_THAT(s.events.back(), HasSubstr("the stop goes on"));
}

TEST_F(JobRecoveryTest, ARejoinWithNoLossKnownWaitsThenRecoversTheSameMembers) {
  auto job = Running(3);
  auto r0 = Rejoin(*job, 0, 7);
  clock_.Advance(Job::kRootCauseWindow - absl::Seconds(1));
  job->Tick();
  EXPECT_EQ(job->Status().state, JobState::kRunning) << "waiting for a loss to be reported";
  clock_.Advance(absl::Seconds(1));
  job->Tick();
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.restarts, 1);
  EXPECT_THAT(s.events.back(), HasSubstr("a collective failed on rank 0"));
  std::vector<std::shared_ptr<Reply>> rest;
  for (int r : {1, 2, 3}) rest.push_back(Rejoin(*job, r, 7));
  ASSERT_TRUE(r0->ok()) << r0->status();
  EXPECT_EQ((*r0)->membership_generation, 1);
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  EXPECT_THAT(job->Status().events.back(), HasSubstr("(same members)"));
}

TEST_F(JobRecoveryTest, WithoutRestartsARejoinFailsFastAndTheDeathBecomesTheRootCause) {
  auto job = Running(0);
  auto r0 = Rejoin(*job, 0, 7);
  ASSERT_TRUE(absl::IsAborted(r0->status())) << r0->status();
  EXPECT_EQ(job->Status().failure.rank, 0);
  clock_.Advance(absl::Seconds(1));
  auto lost = job->ReportLost(Killed(1, 1, 13));
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->action, LostAction::kStop);
  EXPECT_EQ(job->Status().failure.rank, 3);
  EXPECT_EQ(job->Heartbeat(0, 10, {})->cause.rank, 3);
}

TEST_F(JobRecoveryTest, ASilentRankIsLostAndMayComeBack) {
  auto job = Running(3);
  clock_.Advance(absl::Seconds(6));
  for (int r : {0, 1, 2}) ASSERT_TRUE(job->Heartbeat(r, 10 + r, {}).ok());
  clock_.Advance(absl::Seconds(6));
  job->Tick();
  JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.lost_ranks[0].cause.kind, FailureKind::kLostHeartbeat);
  EXPECT_EQ(s.lost_ranks[0].cause.rank, 3);
  for (int r : {0, 1, 2}) Rejoin(*job, r, 9);
  // It was only frozen: it rejoins and takes its own slot back.
  auto back = Rejoin(*job, 3, 9);
  ASSERT_TRUE(back->ok()) << back->status();
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.ranks[3].pid, 13);
  EXPECT_EQ(s.ranks[3].state, RankState::kStarting);
  // Its launcher reporting it now (it died after all) starts the next recovery.
  EXPECT_EQ(job->ReportLost(Killed(1, 1, 13))->action, LostAction::kRespawn);
  EXPECT_EQ(job->Status().restarts, 2);
}

TEST_F(JobRecoveryTest, ASilentWorkerWhoseProcessLivesIsFencedByItsTask) {
  auto job = Running(3);
  // Rank 3 (node 1, local rank 1, pid 13) stops: its process lives, its heartbeats stop.
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1, 2}));
  ASSERT_EQ(job->Status().state, JobState::kRecovering);
  const std::vector<LiveWorker> node1 = {{0, 12}, {1, 13}};
  EXPECT_TRUE(job->Fences(0, {{0, 10}, {1, 11}})->empty()) << "node 0's workers are alive";
  auto fences = job->Fences(1, node1);
  ASSERT_TRUE(fences.ok()) << fences.status();
  ASSERT_EQ(fences->size(), 1u);
  EXPECT_EQ((*fences)[0].local_rank, 1);
  EXPECT_EQ((*fences)[0].pid, 13);
  EXPECT_THAT((*fences)[0].reason, HasSubstr("rank 3"));
  EXPECT_THAT((*fences)[0].reason, HasSubstr("no heartbeat"));
  const auto fenced_events = [&] {
    int n = 0;
    for (const std::string& e : job->Status().events) {
      if (e.find("was declared lost but its process still runs: fenced") != std::string::npos) {
        ++n;
      }
    }
    return n;
  };
  EXPECT_EQ(fenced_events(), 1);
  // Asked again before the kill took effect: the same order, logged once.
  ASSERT_EQ(job->Fences(1, node1)->size(), 1u);
  EXPECT_EQ(fenced_events(), 1);
  // Another process in that slot (the replacement already started) is never fenced.
  EXPECT_TRUE(job->Fences(1, {{0, 12}, {1, 99}})->empty());
  // The task killed it and reports it: it is replaced like a dead worker.
  auto lost = job->ReportLost(Killed(1, 1, 13));
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->action, LostAction::kRespawn);
  EXPECT_THAT(job->Status().events.back(),
              HasSubstr("rank 3 (host host1, node 1, local rank 1, pid 13) fenced: its node's "
                        "task reports it killed by signal 9"));
  EXPECT_EQ(job->Status().restarts, 1) << "the fence costs no restart of its own";
  for (int r : {0, 1, 2}) Rejoin(*job, r, 9);
  auto replacement = Register(*job, Who(1, 1, 23));
  ASSERT_TRUE(replacement->ok()) << replacement->status();
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  EXPECT_TRUE(job->Fences(1, {{0, 12}, {1, 23}})->empty());
}

TEST_F(JobRecoveryTest, NothingIsFencedOnceTheJobIsFinished) {
  auto job = Running(0);
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1, 2}));
  ASSERT_EQ(job->Status().state, JobState::kFailed);
  auto fences = job->Fences(1, {{1, 13}});
  ASSERT_TRUE(fences.ok());
  EXPECT_TRUE(fences->empty()) << "the launchers stop every worker of a failed job themselves";
}

}  // namespace
}  // namespace ddp
