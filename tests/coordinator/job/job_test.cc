#include "coordinator/job/job.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

WorkerIdentity Who(int node, int local, int lws, int pid, std::string nonce = "n") {
  WorkerIdentity w;
  w.host = absl::StrCat("host", node);
  w.node_rank = node;
  w.local_rank = local;
  w.local_world_size = lws;
  w.pid = pid;
  w.nonce = std::move(nonce);
  return w;
}

LostWorker Killed(int node, int local, int pid, int sig = 9) {
  return LostWorker{node, local, pid, absl::StrCat("killed by signal ", sig), sig, 0};
}

class JobTest : public ::testing::Test {
 protected:
  std::unique_ptr<Job> MakeJob(int world) {
    JobConfig c;
    c.job_id = "j";
    c.nonce = "n";
    c.world_size = world;
    c.registration_timeout = absl::Seconds(30);
    c.heartbeat_timeout = absl::Seconds(10);
    return std::make_unique<Job>(c, &clock_);
  }
  // Registers everyone in `who`; returns the results by index.
  std::vector<absl::StatusOr<RankAssignment>> RegisterAll(Job& job,
                                                          const std::vector<WorkerIdentity>& who) {
    std::vector<absl::StatusOr<RankAssignment>> out(who.size(), absl::UnknownError("no reply"));
    for (size_t i = 0; i < who.size(); ++i) {
      job.Register(who[i], [&out, i](absl::StatusOr<RankAssignment> r) { out[i] = r; });
    }
    return out;
  }
  FakeClock clock_;
};

TEST_F(JobTest, RanksFollowNodeThenLocalRankWhateverTheArrivalOrder) {
  struct Case {
    const char* name;
    std::vector<WorkerIdentity> arrivals;
    std::vector<int> want_ranks;  // per arrival
  };
  const std::vector<Case> cases = {
      {"in order",
       {Who(0, 0, 2, 1), Who(0, 1, 2, 2), Who(1, 0, 2, 3), Who(1, 1, 2, 4)},
       {0, 1, 2, 3}},
      {"reversed",
       {Who(1, 1, 2, 4), Who(1, 0, 2, 3), Who(0, 1, 2, 2), Who(0, 0, 2, 1)},
       {3, 2, 1, 0}},
      {"shuffled 4x1",
       {Who(2, 0, 1, 1), Who(0, 0, 1, 2), Who(3, 0, 1, 3), Who(1, 0, 1, 4)},
       {2, 0, 3, 1}},
      {"uneven nodes",
       {Who(1, 0, 1, 1), Who(0, 2, 3, 2), Who(0, 0, 3, 3), Who(0, 1, 3, 4)},
       {3, 2, 0, 1}},
  };
  for (const Case& c : cases) {
    auto job = MakeJob(static_cast<int>(c.arrivals.size()));
    auto results = RegisterAll(*job, c.arrivals);
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << c.name << ": " << results[i].status();
      EXPECT_EQ(results[i]->rank, c.want_ranks[i]) << c.name << " arrival " << i;
      EXPECT_EQ(results[i]->world_size, static_cast<int>(c.arrivals.size()));
    }
    EXPECT_EQ(job->Status().state, JobState::kRunning) << c.name;
  }
}

TEST_F(JobTest, NoReplyUntilTheWorldIsComplete) {
  auto job = MakeJob(2);
  auto first = RegisterAll(*job, {Who(0, 0, 2, 1)});
  EXPECT_EQ(first[0].status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(job->Status().registered, 1);
  EXPECT_EQ(job->Status().state, JobState::kRegistering);
}

TEST_F(JobTest, ReRegisterFromSameProcessGetsSameRankOtherProcessIsRefused) {
  auto job = MakeJob(2);
  auto r = RegisterAll(*job, {Who(0, 0, 2, 11), Who(0, 0, 2, 11), Who(0, 0, 2, 99)});
  EXPECT_TRUE(absl::IsAlreadyExists(r[2].status())) << r[2].status();
  auto rest = RegisterAll(*job, {Who(0, 1, 2, 12)});
  ASSERT_TRUE(r[0].ok());
  ASSERT_TRUE(r[1].ok());
  EXPECT_EQ(r[0]->rank, 0);
  EXPECT_EQ(r[1]->rank, 0);
  // After the world is complete, a retry still gets its rank at once.
  auto again = RegisterAll(*job, {Who(0, 1, 2, 12), Who(0, 1, 2, 13), Who(5, 0, 1, 14)});
  ASSERT_TRUE(again[0].ok());
  EXPECT_EQ(again[0]->rank, 1);
  EXPECT_TRUE(absl::IsAlreadyExists(again[1].status()));
  EXPECT_FALSE(again[2].ok());
}

TEST_F(JobTest, WrongNonceIsRefused) {
  auto job = MakeJob(1);
  auto r = RegisterAll(*job, {Who(0, 0, 1, 1, "stale")});
  EXPECT_TRUE(absl::IsFailedPrecondition(r[0].status()));
  EXPECT_THAT(std::string(r[0].status().message()), HasSubstr("nonce"));
}

TEST_F(JobTest, RegistrationDeadlineNamesTheMissingWorkers) {
  auto job = MakeJob(4);
  auto r = RegisterAll(*job, {Who(0, 0, 2, 1), Who(0, 1, 2, 2)});
  clock_.Advance(absl::Seconds(29));
  job->Tick();
  EXPECT_EQ(job->Status().state, JobState::kRegistering);
  clock_.Advance(absl::Seconds(1));
  job->Tick();
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.text,
            "registration timed out after 30s: 2 of 4 workers registered; missing node 1 "
            "local ranks 0,1");
  EXPECT_EQ(s.failure.kind, FailureKind::kRegistrationTimeout);
  EXPECT_EQ(s.failure.rank, -1);
  for (auto& res : r) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(res.status())) << res.status();
    EXPECT_THAT(std::string(res.status().message()), HasSubstr("missing node 1"));
  }
  EXPECT_TRUE(job->Finished());
  EXPECT_EQ(job->ExitCode(), kExitFailed);
}

TEST_F(JobTest, SilentRankIsLostAndTheOthersAbort) {
  auto job = MakeJob(3);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2), Who(2, 0, 1, 3)});
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(4));
    ASSERT_TRUE(job->Heartbeat(0, 1, {}).ok());
    ASSERT_TRUE(job->Heartbeat(2, 3, {}).ok());
    job->Tick();
  }
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_EQ(s.failure.kind, FailureKind::kLostHeartbeat);
  EXPECT_THAT(s.failure.text, HasSubstr("rank 1 (host host1"));
  EXPECT_THAT(s.failure.text, HasSubstr("lost: no heartbeat"));
  EXPECT_EQ(s.ranks[1].state, RankState::kLost);
  auto reply = job->Heartbeat(0, 1, {});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->command, Command::kAbort);
  EXPECT_EQ(reply->cause.rank, 1);
  EXPECT_EQ(reply->cause.kind, FailureKind::kLostHeartbeat);
  EXPECT_EQ(reply->reason, reply->cause.text);
  // The others stay as they were: a rank's state stops following its phase once the job fails.
  EXPECT_EQ(job->Status().ranks[0].state, RankState::kStarting);
}

// The whole job stopped (e.g. `scontrol suspend`) and continued: the coordinator did not tick
// for 30 s. That gap is not silence; silence before and after it still adds up.
TEST_F(JobTest, TimeTheCoordinatorWasStoppedIsNotSilence) {
  JobConfig c;
  c.job_id = "j";
  c.nonce = "n";
  c.world_size = 2;
  c.registration_timeout = absl::Seconds(30);
  c.heartbeat_timeout = absl::Seconds(10);
  c.suspend_threshold = absl::Seconds(2);
  std::vector<std::string> log;
  c.log = [&log](const std::string& line) { log.push_back(line); };
  Job job(c, &clock_);
  // Registration: 20 s, a 60 s stall, 9 s more: still within the 30 s deadline.
  job.Register(Who(0, 0, 1, 1), [](absl::StatusOr<RankAssignment>) {});
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(absl::Seconds(1));
    job.Tick();
  }
  clock_.Advance(absl::Seconds(60));
  job.Tick();
  for (int i = 0; i < 9; ++i) {
    clock_.Advance(absl::Seconds(1));
    job.Tick();
  }
  ASSERT_EQ(job.Status().state, JobState::kRegistering);
  job.Register(Who(1, 0, 1, 2), [](absl::StatusOr<RankAssignment>) {});
  ASSERT_EQ(job.Status().state, JobState::kRunning);
  // Rank 1 heartbeats throughout; rank 0 goes silent for 8 s, then the coordinator stalls.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(absl::Seconds(1));
    ASSERT_TRUE(job.Heartbeat(1, 2, {}).ok());
    job.Tick();
  }
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(job.Heartbeat(1, 2, {}).ok());  // arrived after the stall, before the next tick
  job.Tick();
  EXPECT_EQ(job.Status().state, JobState::kRunning);
  EXPECT_THAT(log.back(), HasSubstr("coordinator was not running for 30s"));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(job.Heartbeat(1, 2, {}).ok());
  job.Tick();
  EXPECT_EQ(job.Status().state, JobState::kRunning);  // rank 0: 9 s of counted silence
  clock_.Advance(absl::Seconds(1.5));
  ASSERT_TRUE(job.Heartbeat(1, 2, {}).ok());
  job.Tick();
  JobStatus s = job.Status();
  EXPECT_EQ(s.state, JobState::kFailed);  // 10.5 s
  EXPECT_EQ(s.failure.rank, 0);
  EXPECT_THAT(s.failure.text, HasSubstr("lost: no heartbeat for 10.5s"));
}

TEST_F(JobTest, WithoutAStallThresholdEveryGapIsSilence) {
  auto job = MakeJob(1);
  RegisterAll(*job, {Who(0, 0, 1, 1)});
  clock_.Advance(absl::Seconds(30));
  job->Tick();
  EXPECT_EQ(job->Status().state, JobState::kFailed);
}

TEST_F(JobTest, AllDoneSucceedsOneFailureFailsNamingTheRank) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ASSERT_TRUE(job->ReportDone(0, 1, absl::OkStatus()).ok());
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  ASSERT_TRUE(job->ReportDone(1, 2, absl::OkStatus()).ok());
  EXPECT_EQ(job->Status().state, JobState::kSucceeded);
  EXPECT_EQ(job->ExitCode(), kExitOk);
  EXPECT_EQ(job->Status().ranks[0].state, RankState::kDone);

  auto failing = MakeJob(2);
  RegisterAll(*failing, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ASSERT_TRUE(failing->ReportDone(1, 2, absl::InternalError("CUDA out of memory")).ok());
  JobStatus s = failing->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_EQ(s.failure.kind, FailureKind::kWorkerError);
  EXPECT_THAT(s.failure.text, HasSubstr("CUDA out of memory"));
  EXPECT_EQ(s.ranks[1].state, RankState::kFailed);
  EXPECT_EQ(failing->Heartbeat(0, 1, {})->command, Command::kAbort);
  EXPECT_EQ(failing->ExitCode(), kExitFailed);
}

TEST_F(JobTest, GracefulStopAsksForCheckpointThenFinishesStopped) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "maintenance").ok());
  EXPECT_EQ(job->Status().state, JobState::kStopping);
  EXPECT_EQ(job->Status().stop_reason, "maintenance");
  EXPECT_TRUE(job->Status().failure.empty()) << "a stop is not a failure";
  auto reply = job->Heartbeat(0, 1, {});
  EXPECT_EQ(reply->command, Command::kCheckpointAndStop);
  EXPECT_EQ(reply->reason, "checkpoint and stop: maintenance");
  EXPECT_TRUE(reply->cause.empty());
  ASSERT_TRUE(job->Stop(/*graceful=*/true, "again").ok());  // already stopping: no change
  ASSERT_TRUE(job->CommitCheckpoint(0, 1, {1, 40, 320, "/ckpt/e1.pt"}).ok());
  ASSERT_TRUE(job->ReportDone(0, 1, absl::CancelledError("stopped after checkpoint")).ok());
  EXPECT_FALSE(job->Finished());
  ASSERT_TRUE(job->ReportDone(1, 2, absl::CancelledError("stopped after checkpoint")).ok());
  EXPECT_TRUE(job->Finished());
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopped);
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.stop_reason, "maintenance");
  EXPECT_EQ(s.ranks[1].state, RankState::kStopped);
  EXPECT_EQ(job->ExitCode(), kExitResumable);
  EXPECT_EQ(s.checkpoint_step, 40);
  EXPECT_FALSE(job->Stop(true, "late").ok());
}

TEST_F(JobTest, StopNowAborts) {
  auto job = MakeJob(1);
  RegisterAll(*job, {Who(0, 0, 1, 1)});
  ASSERT_TRUE(job->Stop(/*graceful=*/false, "bad lr").ok());
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.kind, FailureKind::kOperatorStop);
  EXPECT_EQ(s.failure.rank, -1);
  EXPECT_EQ(s.failure.text, "stopped by operator: bad lr");
  EXPECT_EQ(job->Heartbeat(0, 1, {})->command, Command::kAbort);
  EXPECT_FALSE(job->Stop(false, "again").ok());

  // A graceful stop before the world is complete has nothing to checkpoint: it aborts.
  auto registering = MakeJob(2);
  auto r = RegisterAll(*registering, {Who(0, 0, 2, 1)});
  ASSERT_TRUE(registering->Stop(/*graceful=*/true, "").ok());
  EXPECT_EQ(registering->Status().failure.text, "stopped by operator: operator request");
  EXPECT_TRUE(absl::IsAborted(r[0].status())) << r[0].status();
}

TEST_F(JobTest, ShardParametersMustAgreeAndEpochsGoForward) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ShardRequest req;
  req.epoch = 1;
  req.dataset_size = 100;
  req.seed = 7;
  auto a = job->GetShard(0, 1, req);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->world_size, 2);
  EXPECT_EQ(a->rank, 0);
  EXPECT_EQ(a->consumed, 0);
  ShardRequest other = req;
  other.seed = 8;
  EXPECT_TRUE(absl::IsInvalidArgument(job->GetShard(1, 2, other).status()));
  ShardRequest back = req;
  back.epoch = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(job->GetShard(0, 1, back).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(job->GetShard(1, 999, req).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(job->GetShard(5, 1, req).status()));
  // A committed checkpoint of this epoch sets the resume position.
  ASSERT_TRUE(job->CommitCheckpoint(0, 1, {2, 10, 40, "/c.pt"}).ok());
  ShardRequest e2 = req;
  e2.epoch = 2;
  auto resumed = job->GetShard(1, 2, e2);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->consumed, 40);
  EXPECT_EQ(resumed->consumed_world_size, 2);
}

TEST_F(JobTest, LostWorkerFailsTheJobNamingItsRank) {
  auto job = MakeJob(4);
  RegisterAll(*job, {Who(0, 0, 2, 10), Who(0, 1, 2, 11), Who(1, 0, 2, 12), Who(1, 1, 2, 13)});
  // A report about a process that is not (or no longer) the registered one changes nothing.
  EXPECT_TRUE(absl::IsNotFound(job->ReportLost(Killed(1, 1, 99)).status()));
  EXPECT_TRUE(absl::IsNotFound(job->ReportLost(Killed(7, 0, 13)).status()));
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  auto who = job->ReportLost(Killed(1, 1, 13));
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->description, "rank 3 (host host1, node 1, local rank 1, pid 13)");
  EXPECT_EQ(who->action, LostAction::kStop) << "no restarts: the launcher stops the others";
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kFailed);
  EXPECT_EQ(s.failure.rank, 3);
  EXPECT_EQ(s.failure.kind, FailureKind::kSignal);
  EXPECT_THAT(s.failure.text, HasSubstr("rank 3 (host host1, node 1, local rank 1, pid 13) "
                                        "killed by signal 9"));
  EXPECT_EQ(s.ranks[3].state, RankState::kLost);
  auto hb = job->Heartbeat(0, 10, {});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->command, Command::kAbort);
  EXPECT_EQ(hb->cause.rank, 3);
  EXPECT_EQ(hb->cause.kind, FailureKind::kSignal);

  // An exit without a signal is typed as such.
  auto exited = MakeJob(1);
  RegisterAll(*exited, {Who(0, 0, 1, 10)});
  ASSERT_TRUE(exited->ReportLost({0, 0, 10, "exited with code 7", 0, 7}).ok());
  EXPECT_EQ(exited->Status().failure.kind, FailureKind::kExitCode);
}

TEST_F(JobTest, DeathReportedSoonAfterAPeerErrorBecomesTheRootCause) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 10), Who(1, 0, 1, 11)});
  // Rank 0 sees the broken connection first and reports it; the launcher of rank 1 then says
  // rank 1 was killed: the failure is re-attributed to rank 1, with rank 0's error kept.
  ASSERT_TRUE(job->ReportDone(0, 10, absl::UnavailableError("Connection reset by peer")).ok());
  EXPECT_EQ(job->Status().failure.rank, 0);
  EXPECT_EQ(job->Status().failure.kind, FailureKind::kCollectiveError);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(job->ReportLost(Killed(1, 0, 11)).ok());
  JobStatus s = job->Status();
  EXPECT_EQ(s.failure.rank, 1);
  EXPECT_EQ(s.failure.kind, FailureKind::kSignal);
  EXPECT_THAT(s.failure.text, HasSubstr("rank 1 (host host1, node 1, local rank 0, pid 11) "
                                        "killed by signal 9; then rank 0"));
  EXPECT_THAT(s.failure.text, HasSubstr("Connection reset by peer"));
  EXPECT_THAT(s.events.back(), HasSubstr("root cause: rank 1"));
  // Rank 0's heartbeat now learns it was not the cause.
  EXPECT_EQ(job->Heartbeat(0, 10, {})->cause.rank, 1);

  // Too late (outside the window): the first failure stands, the death is only an event.
  auto late = MakeJob(2);
  RegisterAll(*late, {Who(0, 0, 1, 10), Who(1, 0, 1, 11)});
  ASSERT_TRUE(late->ReportDone(0, 10, absl::InternalError("bad input")).ok());
  clock_.Advance(Job::kRootCauseWindow + absl::Seconds(1));
  ASSERT_TRUE(late->ReportLost(Killed(1, 0, 11)).ok());
  EXPECT_EQ(late->Status().failure.rank, 0);
  EXPECT_THAT(late->Status().events.back(), HasSubstr("rank 1"));
}

TEST_F(JobTest, DeathDuringRegistrationFailsTheJob) {
  auto job = MakeJob(2);
  auto r = RegisterAll(*job, {Who(0, 0, 2, 10)});
  ASSERT_TRUE(job->ReportLost(Killed(0, 0, 10, 11)).ok());
  EXPECT_EQ(job->Status().state, JobState::kFailed);
  EXPECT_THAT(job->Status().failure.text, HasSubstr("killed by signal 11 during registration"));
  EXPECT_EQ(job->Status().failure.rank, -1);
  EXPECT_FALSE(r[0].ok());
}

TEST_F(JobTest, CancelledWhileRunningStartsAGracefulStopOfTheJob) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  // Slurm signalled rank 1's node first: it checkpointed and stopped on its own.
  ASSERT_TRUE(job->ReportDone(1, 2, absl::CancelledError("SIGUSR1")).ok());
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kStopping);
  EXPECT_EQ(s.stop_reason, "rank 1 (host host1, node 1, local rank 0, pid 2) stopped");
  EXPECT_EQ(job->Heartbeat(0, 1, {})->command, Command::kCheckpointAndStop);
  ASSERT_TRUE(job->ReportDone(0, 1, absl::CancelledError("stopped")).ok());
  EXPECT_EQ(job->Status().state, JobState::kStopped);
  EXPECT_EQ(job->ExitCode(), kExitResumable);
}

TEST_F(JobTest, ARetriedReportChangesNothing) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ASSERT_TRUE(job->ReportDone(0, 1, absl::OkStatus()).ok());
  ASSERT_TRUE(job->ReportDone(0, 1, absl::OkStatus()).ok());  // the reply was lost
  EXPECT_EQ(job->Status().state, JobState::kRunning) << "one rank done is not every rank";
}

TEST_F(JobTest, StepPhaseIsReported) {
  auto job = MakeJob(1);
  RegisterAll(*job, {Who(0, 0, 1, 1)});
  ProgressReport p;
  p.phase = WorkerPhase::kTraining;
  p.step_phase = StepPhase::kData;
  p.phase_seconds = 42;
  ASSERT_TRUE(job->Heartbeat(0, 1, p).ok());
  EXPECT_EQ(job->Status().ranks[0].phase, StepPhase::kData);
  EXPECT_DOUBLE_EQ(job->Status().ranks[0].phase_seconds, 42);
}

TEST_F(JobTest, CallsBeforeRegistrationAreRefused) {
  auto job = MakeJob(2);
  EXPECT_TRUE(absl::IsFailedPrecondition(job->Heartbeat(0, 1, {}).status()));
}

TEST_F(JobTest, StatusAggregatesProgress) {
  auto job = MakeJob(2);
  RegisterAll(*job, {Who(0, 0, 1, 1), Who(1, 0, 1, 2)});
  ProgressReport p;
  p.phase = WorkerPhase::kTraining;
  p.epoch = 1;
  p.epochs = 3;
  p.step = 12;
  p.steps_per_epoch = 10;
  p.loss = 1.0;
  p.samples_per_second = 50;
  ASSERT_TRUE(job->Heartbeat(0, 1, p).ok());
  p.step = 10;
  p.loss = 3.0;
  ASSERT_TRUE(job->Heartbeat(1, 2, p).ok());
  JobStatus s = job->Status();
  EXPECT_EQ(s.step, 10);
  EXPECT_DOUBLE_EQ(s.loss, 2.0);
  EXPECT_DOUBLE_EQ(s.samples_per_second, 100);
  EXPECT_EQ(s.ranks[0].state, RankState::kTraining);
  EXPECT_FALSE(s.events.empty());
}

TEST(JobHeartbeatIntervalTest, GrowsWithTheWorldWithinTheTimeout) {
  struct Case {
    int world;
    double timeout_s;
    double want_s;
  };
  for (const Case& c : std::vector<Case>{{1, 10, 1},
                                         {4096, 10, 1},
                                         {8192, 10, 2},
                                         {16384, 10, 2.5},
                                         {16384, 60, 4},
                                         {65536, 60, 15},
                                         {16384, 3, 1}}) {
    EXPECT_EQ(Job::HeartbeatInterval(c.world, absl::Seconds(c.timeout_s)), absl::Seconds(c.want_s))
        << c.world << " ranks, timeout " << c.timeout_s;
  }
}

}  // namespace
}  // namespace ddp
