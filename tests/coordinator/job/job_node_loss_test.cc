// Job's handling of a node lost as a whole (proto/coordinator.proto, SPARES and SHRINKING)
// against a fake clock: a spare standing by takes the lost node over; a node whose launcher
// reports its workers is not taken over; a spare that fell silent is not used; without a spare,
// --min-nodes drops the node and the rest of the epoch is re-split; a frozen rank of a dropped
// node that comes back is refused; no shrinking below --min-nodes. And the status names the
// coordinator's standby node.
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

using JobNodeLossTest = JobRecoveryTest;

SpareReport Spare(int node, int pid) {
  SpareReport s;
  s.node_rank = node;
  s.local_world_size = 2;
  s.host = absl::StrCat("host", node);
  s.pid = pid;
  s.nonce = "n";
  return s;
}

TEST_F(JobNodeLossTest, ANodeLostAsAWholeIsTakenOverByASpare) {
  auto job = Running(3);
  auto wait = job->StandBy(Spare(2, 50));
  ASSERT_TRUE(wait.ok()) << wait.status();
  EXPECT_EQ(wait->action, SpareAction::kWait);
  EXPECT_EQ(job->Status().spare_nodes, 1);
  EXPECT_THAT(job->Status().events.back(),
              HasSubstr("spare node 2 (host host2, pid 50) stands by with 2 workers"));
  EXPECT_TRUE(absl::IsInvalidArgument(job->StandBy(Spare(1, 51)).status()))
      << "node 1 holds ranks: it cannot be a spare";
  SpareReport stale = Spare(3, 52);
  stale.nonce = "old";
  EXPECT_TRUE(absl::IsFailedPrecondition(job->StandBy(stale).status()));

  // Node 1's task dies with its workers (ranks 2 and 3): the survivors' collective fails first,
  // then both go silent. The spare and the survivors keep calling.
  std::vector<std::shared_ptr<Reply>> replies(4);
  for (int r : {0, 1}) replies[r] = Rejoin(*job, r, 9);
  ASSERT_NO_FATAL_FAILURE(
      Pass(*job, 11, {0, 1}, [&] { ASSERT_TRUE(job->StandBy(Spare(2, 50)).ok()); }));
  JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.restarts, 2) << "one restart per lost rank, the unexplained failure included";
  EXPECT_EQ(s.spare_nodes, 0);
  EXPECT_THAT(s.events.back(), HasSubstr("lost node 1 (host host1, ranks 2,3): its task and "
                                         "workers went silent; spare node 2 (host host2, pid "
                                         "50) takes over its ranks"));
  auto take = job->StandBy(Spare(2, 50));
  ASSERT_TRUE(take.ok());
  EXPECT_EQ(take->action, SpareAction::kTakeOver);
  EXPECT_EQ(take->node_rank, 1);
  EXPECT_EQ(take->description, "node 1 (host host1, ranks 2,3)");

  // The spare's workers register as node 1: the same world, ranks 2 and 3 on host2.
  WorkerIdentity a = Who(1, 0, 60), b = Who(1, 1, 61);
  a.host = b.host = "host2";
  replies[2] = Register(*job, a);
  EXPECT_TRUE(Waiting(replies[2]));
  replies[3] = Register(*job, b);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(replies[r]->ok()) << r << ": " << replies[r]->status();
    EXPECT_EQ((*replies[r])->rank, r);
    EXPECT_EQ((*replies[r])->world_size, 4);
    EXPECT_TRUE((*replies[r])->state_from_peers);
  }
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.ranks[2].host, "host2");
  EXPECT_EQ(s.ranks[3].pid, 61);
  EXPECT_TRUE(s.lost_ranks[1].replaced);
  // The job ends: a spare still standing by is told to leave.
  ASSERT_TRUE(job->Stop(false, "test").ok());
  auto leave = job->StandBy(Spare(4, 70));
  ASSERT_TRUE(leave.ok());
  EXPECT_EQ(leave->action, SpareAction::kLeave);
}

TEST_F(JobNodeLossTest, ANodeWhoseLauncherReportsIsNotTakenOver) {
  auto job = Running(3);
  ASSERT_TRUE(job->StandBy(Spare(2, 50)).ok());
  // Both workers of node 1 die and their launcher reports them: it respawns them itself.
  EXPECT_EQ(job->ReportLost(Killed(1, 0, 12))->action, LostAction::kRespawn);
  EXPECT_EQ(job->ReportLost(Killed(1, 1, 13))->action, LostAction::kRespawn);
  clock_.Advance(absl::Seconds(1));
  job->Tick();
  auto d = job->StandBy(Spare(2, 50));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, SpareAction::kWait);
  EXPECT_EQ(job->Status().spare_nodes, 1);
}

TEST_F(JobNodeLossTest, ANodeWhoseTaskStillAsksForFencesIsNotTakenOver) {
  auto job = Running(3);
  const std::vector<LiveWorker> node1 = {{0, 12}, {1, 13}};
  // Both workers of node 1 hang (alive, silent); its task keeps asking what to fence.
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1}, [&] {
    ASSERT_TRUE(job->StandBy(Spare(2, 50)).ok());
    ASSERT_TRUE(job->Fences(1, node1).ok());
  }));
  ASSERT_EQ(job->Status().state, JobState::kRecovering);
  auto d = job->StandBy(Spare(2, 50));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, SpareAction::kWait) << "node 1's task lives: it fences and replaces";
  EXPECT_EQ(job->Fences(1, node1)->size(), 2u);
  // Then the task goes silent too (the node died): past NodeTasks::kAliveWithin it is lost.
  ASSERT_NO_FATAL_FAILURE(
      Pass(*job, 5, {0, 1}, [&] { ASSERT_TRUE(job->StandBy(Spare(2, 50)).ok()); }));
  d = job->StandBy(Spare(2, 50));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, SpareAction::kTakeOver);
  EXPECT_EQ(d->node_rank, 1);
}

TEST_F(JobNodeLossTest, ASpareThatFellSilentIsNotUsedButOneThatCallsIs) {
  auto job = Running(3);
  // A spare that stopped calling is gone by the time node 1 is lost.
  ASSERT_TRUE(job->StandBy(Spare(2, 50)).ok());
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1}));
  JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(s.spare_nodes, 0);
  EXPECT_EQ(job->StandBy(Spare(2, 51))->action, SpareAction::kTakeOver)
      << "a spare that comes (back) while the node is vacant takes it over";
}

// Shrinking (--min-nodes): node 1 is lost as a whole and no spare stands by; the job goes on with
// node 0 alone, its ranks renumbered in a world of 2, and the rest of the epoch is re-split.
TEST_F(JobNodeLossTest, ANodeLostWithoutASpareIsDroppedWhenMinNodesAllows) {
  auto job = Running(3, /*min_nodes=*/1);
  std::vector<std::shared_ptr<Reply>> replies;
  for (int r : {0, 1}) replies.push_back(Rejoin(*job, r, 9));
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1}));
  for (int r : {0, 1}) {
    ASSERT_TRUE(replies[r]->ok()) << replies[r]->status();
    EXPECT_EQ((*replies[r])->rank, r);
    EXPECT_EQ((*replies[r])->world_size, 2);
    EXPECT_EQ((*replies[r])->membership_generation, 1);
    EXPECT_TRUE((*replies[r])->state_from_peers);
  }
  JobStatus s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.restarts, 2);
  bool dropped = false;
  for (const std::string& e : s.events) {
    dropped = dropped || e.find(
                             "lost node 1 (host host1, ranks 2,3): its task and workers went "
                             "silent; no spare standing by: the job goes on without it on 1 "
                             "node(s), world 4 -> 2 (--min-nodes 1)") != std::string::npos;
  }
  EXPECT_TRUE(dropped) << s.events.back();
  // The rest of the epoch: 3200 of its 100000 positions were read by the world of 4; the other
  // 96800 go to the world of 2.
  ShardRequest req;
  req.epoch = 0;
  req.dataset_size = 100000;
  req.resume_consumed = 3200;
  req.resume_world_size = 4;
  auto shard = job->GetShard(1, 11, req);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->world_size, 2);
  EXPECT_EQ(shard->rank, 1);
  EXPECT_EQ(shard->consumed, 3200);
  EXPECT_EQ(shard->consumed_world_size, 4);
  EXPECT_THAT(job->Status().events.back(),
              HasSubstr("epoch 0 re-split: positions [0, 3200) of its order (100000, world 4) "
                        "were read; the other 96800 go to world 2, 48400 per rank (0 repeated"));
  // The dropped ranks are gone: no call in their name, and no silence judged.
  EXPECT_FALSE(job->Heartbeat(2, 12, {}).ok());
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 12, {0, 1}));
  EXPECT_EQ(job->Status().state, JobState::kRunning);
  EXPECT_EQ(job->Status().restarts, 2);
}

// A rank of the dropped node that was only frozen comes back while the smaller generation forms
// (found by fuzz_job: fuzz/regressions/job/rejoin-after-shrink): refused, the others go on.
TEST_F(JobNodeLossTest, ARankOfADroppedNodeThatComesBackIsRefused) {
  auto job = Running(3, /*min_nodes=*/1);
  auto r0 = Rejoin(*job, 0, 9);
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1}));
  ASSERT_EQ(job->Status().state, JobState::kRecovering) << "rank 1 has not rejoined yet";
  auto back = Rejoin(*job, 2, 9);
  EXPECT_TRUE(absl::IsFailedPrecondition(back->status())) << back->status();
  EXPECT_THAT(std::string(back->status().message()), HasSubstr("was dropped"));
  auto r1 = Rejoin(*job, 1, 9);
  ASSERT_TRUE(r0->ok() && r1->ok()) << r0->status() << r1->status();
  EXPECT_EQ((*r1)->world_size, 2);
  EXPECT_EQ(job->Status().state, JobState::kRunning);
}

TEST_F(JobNodeLossTest, ALostNodeIsNotDroppedBelowMinNodes) {
  auto job = Running(3, /*min_nodes=*/2);
  for (int r : {0, 1}) Rejoin(*job, r, 9);
  ASSERT_NO_FATAL_FAILURE(Pass(*job, 11, {0, 1}));
  EXPECT_EQ(job->Status().state, JobState::kRecovering) << "the recovery deadline decides";
  EXPECT_EQ(job->Status().world_size, 4);
}

// A journal whose file is 3 records behind what was appended (a standby would miss those).
class BehindJournal : public JournalSink {
 public:
  void Registered(const WorkerIdentity&) override {}
  void GenerationFormed(const RankTable&, int) override {}
  void CheckpointCommitted(const CommittedCheckpoint&) override {}
  void EpochAgreed(int64_t, const ShardRequest&) override {}
  void StopRequested(const std::string&) override {}
  void RankFinished(int, int, bool) override {}
  void JobFailed(const FailureCause&) override {}
  JournalHealth Health() const override { return {JournalCondition::kOk, "", 9, 3, 0, 0.0}; }
};

// The status names the coordinator and, with --standby auto in a job of two or more nodes, its
// standby: the next node (StandbyWatch::StandbyOf), that node's host, and the journal records
// not yet in the file. None while registering, and none with --standby off.
TEST_F(JobNodeLossTest, TheStatusNamesTheCoordinatorAndItsStandby) {
  BehindJournal journal;
  JobConfig c;
  c.job_id = "j";
  c.nonce = "n";
  c.world_size = 4;
  c.journal = &journal;
  c.standby = true;
  Job job(c, &clock_);
  job.SetCoordinator({0, 0, "coord0", -1, "", 0});
  Register(job, Who(0, 0, 10));
  EXPECT_EQ(job.Status().coordinator.standby_node, -1) << "no nodes with ranks yet";
  for (int r = 1; r < 4; ++r) Register(job, Who(r / 2, r % 2, 10 + r));
  CoordinatorInfo info = job.Status().coordinator;
  EXPECT_EQ(info.epoch, 0);
  EXPECT_EQ(info.node, 0);
  EXPECT_EQ(info.host, "coord0");
  EXPECT_EQ(info.standby_node, 1);
  EXPECT_EQ(info.standby_host, "host1");
  EXPECT_EQ(info.standby_behind_records, 3);
  // Node 1's standby took over (epoch 1): node 0 is its standby now.
  job.SetCoordinator({1, 1, "coord1", -1, "", 0});
  info = job.Status().coordinator;
  EXPECT_EQ(info.epoch, 1);
  EXPECT_EQ(info.takeovers(), 1);
  EXPECT_EQ(info.host, "coord1");
  EXPECT_EQ(info.standby_node, 0);
  EXPECT_EQ(info.standby_host, "host0");

  c.standby = false;
  Job without(c, &clock_);
  for (int r = 0; r < 4; ++r) Register(without, Who(r / 2, r % 2, 10 + r));
  ASSERT_EQ(without.Status().state, JobState::kRunning);
  EXPECT_FALSE(without.Status().coordinator.has_standby());
}

}  // namespace
}  // namespace ddp
