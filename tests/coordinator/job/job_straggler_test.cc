// The Job's straggler watch and time account, driven by a fake clock: a rank whose heartbeats
// say it is busy twice as long per step is named in the status (stragglers, its score and flag)
// and in an event after --straggler-window, and cleared with an event once it recovers; the
// time since the start is split into start-up, training and evaluation. --straggler-action
// exclude passes the straggler's node to the exclude callback once per cause; replace hands the
// node to a spare standing by (its ranks lost, its old workers fenced, refused a rejoin, ignored
// when they end, and their task told to leave), or says once why it cannot.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

constexpr int kCompute = static_cast<int>(StepSection::kCompute);
constexpr int kComm = static_cast<int>(StepSection::kCommunication);

class JobStragglerTest : public ::testing::Test {
 protected:
  static constexpr int kWorld = 4;

  std::unique_ptr<Job> MakeJob(StragglerAction action = StragglerAction::kWarn) {
    JobConfig c;
    c.job_id = "j";
    c.world_size = kWorld;
    c.heartbeat_timeout = absl::Seconds(10);
    c.max_restarts = 4;
    c.straggler = {0.75, absl::Seconds(10), action};
    c.exclude = [this](const NodeExclusion& e) { excluded_.push_back(e); };
    auto job = std::make_unique<Job>(c, &clock_);
    clock_.Advance(absl::Seconds(3));  // start-up: the workers register after 3 s
    for (int r = 0; r < kWorld; ++r) {
      WorkerIdentity w;
      w.host = absl::StrCat("n", r / 2);
      w.node_rank = r / 2;
      w.local_rank = r % 2;
      w.pid = r + 1;
      w.node_name = absl::StrCat("sn", r / 2);
      job->Register(w, [](absl::StatusOr<RankAssignment>) {});
    }
    return job;
  }

  // `seconds` of heartbeats, one a second per rank, ticking every 100 ms; rank `slow` (if any)
  // computes `factor` times longer, the others wait for it in communication.
  void Run(Job& job, int seconds, int slow = -1, double factor = 1, bool eval = false) {
    for (int i = 0; i < seconds * 10; ++i) {
      clock_.Advance(absl::Milliseconds(100));
      job.Tick();
      if (i % 10 != 9) continue;
      if (each_second_) each_second_();
      const double step = 0.1 * (slow >= 0 ? factor : 1);
      const int64_t steps = eval ? 0 : static_cast<int64_t>(1.0 / step);
      for (int r = 0; r < kWorld; ++r) {
        SectionTotals& t = totals_[r];
        t.steps += steps;
        const double compute = r == slow ? step : 0.1;
        t.seconds[kCompute] += static_cast<double>(steps) * compute;
        t.seconds[kComm] += static_cast<double>(steps) * (step - compute);
        ProgressReport p;
        p.phase = eval ? WorkerPhase::kEvaluating : WorkerPhase::kTraining;
        p.step_phase = eval ? StepPhase::kEval : StepPhase::kForward;
        p.step = t.steps;
        p.epochs = 1;
        p.steps_per_epoch = 100000;
        p.sections = t;
        ASSERT_TRUE(job.Heartbeat(r, r + 1, p).ok());
      }
    }
  }

  static bool HasEvent(const JobStatus& s, const std::string& text) {
    for (const std::string& e : s.events) {
      if (e.find(text) != std::string::npos) return true;
    }
    return false;
  }

  FakeClock clock_;
  SectionTotals totals_[kWorld];
  std::vector<NodeExclusion> excluded_;
  std::function<void()> each_second_;
};

int CountEvents(const JobStatus& s, const std::string& text) {
  int n = 0;
  for (const std::string& e : s.events) n += e.find(text) != std::string::npos ? 1 : 0;
  return n;
}

TEST_F(JobStragglerTest, ASlowRankIsNamedEverywhereAndClears) {
  auto job = MakeJob();
  Run(*job, 10);
  JobStatus s = job->Status();
  EXPECT_TRUE(s.stragglers.empty());
  ASSERT_TRUE(s.ranks[3].score.measured);
  EXPECT_NEAR(s.ranks[3].score.relative, 1.0, 1e-6);

  Run(*job, 8, /*slow=*/3, /*factor=*/2);
  s = job->Status();
  EXPECT_TRUE(s.stragglers.empty()) << "not before the 10 s window";
  EXPECT_NEAR(s.ranks[3].score.relative, 0.5, 0.05);
  Run(*job, 6, 3, 2);
  s = job->Status();
  ASSERT_EQ(s.stragglers.size(), 1u);
  const StragglerReport& st = s.stragglers[0];
  EXPECT_EQ(st.rank, 3);
  EXPECT_EQ(st.host, "n1");
  EXPECT_EQ(st.node_rank, 1);
  EXPECT_EQ(st.section, StepSection::kCompute);
  EXPECT_NEAR(st.slower, 2, 0.1);
  EXPECT_GE(st.seconds, 10);
  EXPECT_TRUE(s.ranks[3].score.straggler);
  EXPECT_FALSE(s.ranks[0].score.straggler);
  EXPECT_THAT(ToJson(s), HasSubstr("\"flag\":\"straggler\""));
  EXPECT_TRUE(HasEvent(s, "rank 3 (host n1"));
  EXPECT_TRUE(HasEvent(s, "is a straggler: compute 2.0x slower than the best rank"));
  EXPECT_EQ(s.breakdown.rank, 3);
  EXPECT_NEAR(s.breakdown.seconds[kCompute], 0.2, 0.01);

  Run(*job, 10);
  s = job->Status();
  EXPECT_TRUE(s.stragglers.empty());
  EXPECT_TRUE(
      HasEvent(s, "rank 3 (host n1, node 1, local rank 1, pid 4) is no longer a straggler"));
}

TEST_F(JobStragglerTest, TheTimeUseSplitsTheWallTime) {
  auto job = MakeJob();
  Run(*job, 20);
  Run(*job, 5, -1, 1, /*eval=*/true);
  const TimeUse u = job->Status().time_use;
  EXPECT_NEAR(u.wall, 28, 0.01);
  // What the ranks do is known from their heartbeats, a heartbeat period (1 s) late: start-up
  // is registration (3 s) and the wait for the first step's heartbeat; evaluation is seen from
  // its first heartbeat on.
  EXPECT_NEAR(u.startup, 4, 0.2);
  EXPECT_NEAR(u.training, 20, 0.2);
  EXPECT_NEAR(u.evaluation, 4, 0.2);
  EXPECT_NEAR(u.ettr(), 20.0 / 28, 0.01);
  EXPECT_NEAR(u.startup + u.training + u.evaluation + u.checkpoint + u.recovery + u.stall + u.other,
              u.wall, 1e-6);
}

TEST_F(JobStragglerTest, ExcludeWritesTheSlowNodeOncePerCause) {
  auto job = MakeJob(StragglerAction::kExclude);
  Run(*job, 10);
  Run(*job, 30, /*slow=*/3, /*factor=*/2);
  const JobStatus s = job->Status();
  ASSERT_EQ(s.stragglers.size(), 1u);
  ASSERT_EQ(excluded_.size(), 1u) << "once, however long it stays slow";
  EXPECT_EQ(excluded_[0].node, "sn1") << "the Slurm node name, not the host";
  EXPECT_EQ(excluded_[0].section, "compute");
  EXPECT_EQ(excluded_[0].rank, 3);
  EXPECT_LT(excluded_[0].relative_score, 0.75);
  EXPECT_EQ(CountEvents(s, "--straggler-action exclude: node sn1 (node 1"), 1);
  EXPECT_EQ(s.state, JobState::kRunning) << "the job goes on";
}

TEST_F(JobStragglerTest, ReplaceWithoutASpareWarnsOnce) {
  auto job = MakeJob(StragglerAction::kReplace);
  Run(*job, 10);
  Run(*job, 30, /*slow=*/3, /*factor=*/2);
  const JobStatus s = job->Status();
  ASSERT_EQ(s.stragglers.size(), 1u);
  EXPECT_EQ(CountEvents(s,
                        "is not replaced: no spare node with 2 worker(s) stands by; warned "
                        "only"),
            1);
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.restarts, 0);
}

TEST_F(JobStragglerTest, ReplaceNeverHandsOverNodeZero) {
  auto job = MakeJob(StragglerAction::kReplace);
  const SpareReport spare{/*node_rank=*/2, /*local_world_size=*/2, "n2", /*pid=*/99, ""};
  each_second_ = [&] { ASSERT_TRUE(job->StandBy(spare).ok()); };
  Run(*job, 10);
  Run(*job, 30, /*slow=*/1, /*factor=*/2);
  const JobStatus s = job->Status();
  EXPECT_EQ(CountEvents(s, "node 0 runs the coordinator and is never handed over"), 1);
  EXPECT_EQ(s.state, JobState::kRunning);
}

TEST_F(JobStragglerTest, ReplaceHandsTheNodeToASpareAndTheOldWorkersLeave) {
  auto job = MakeJob(StragglerAction::kReplace);
  const SpareReport spare{/*node_rank=*/2, /*local_world_size=*/2, "n2", /*pid=*/99, ""};
  each_second_ = [&] { ASSERT_TRUE(job->StandBy(spare).ok()); };
  Run(*job, 10);
  EXPECT_EQ(job->Status().spare_nodes, 1);
  for (int i = 0; i < 30 && job->Status().state == JobState::kRunning; ++i) {
    Run(*job, 1, /*slow=*/3, /*factor=*/2);
  }
  JobStatus s = job->Status();
  ASSERT_EQ(s.state, JobState::kRecovering);
  EXPECT_EQ(CountEvents(s,
                        "--straggler-action replace: node 1 (host n1, ranks 2,3) is handed to "
                        "spare node 2 (host n2, pid 99), in the job"),
            1);
  ASSERT_EQ(s.lost_ranks.size(), 2u);
  EXPECT_EQ(s.lost_ranks[0].cause.rank, 2);
  EXPECT_EQ(s.lost_ranks[0].cause.kind, FailureKind::kStragglerReplaced);
  EXPECT_EQ(s.restarts, 2);

  // The spare is told to take node 1 over.
  absl::StatusOr<SpareDecision> d = job->StandBy(spare);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->action, SpareAction::kTakeOver);
  EXPECT_EQ(d->node_rank, 1);
  // Node 1's task is told to fence both old workers.
  absl::StatusOr<std::vector<FenceOrder>> fences = job->Fences(1, {{0, 3}, {1, 4}});
  ASSERT_TRUE(fences.ok());
  ASSERT_EQ(fences->size(), 2u);
  EXPECT_EQ((*fences)[0].pid, 3);
  EXPECT_EQ((*fences)[1].pid, 4);
  // An old worker whose collective failed first may not rejoin; its error report is ignored.
  absl::Status rejoined;
  job->Rejoin(2, 3, RejoinRequest{0, 100, "gloo: connection closed"},
              [&](absl::StatusOr<RankAssignment> a) { rejoined = a.status(); });
  EXPECT_TRUE(absl::IsFailedPrecondition(rejoined)) << rejoined;
  EXPECT_TRUE(job->ReportDone(3, 4, absl::UnavailableError("rejoin refused")).ok());
  EXPECT_NE(job->Status().state, JobState::kFailed);
  // The fenced workers' task is told to leave.
  absl::StatusOr<LostDecision> lost = job->ReportLost({1, 0, 3, "killed by signal 9", 9, 0});
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->action, LostAction::kLeave);
  // The survivors rejoin and the spare's workers register as node 1: the job runs again.
  for (int r = 0; r < 2; ++r) {
    job->Rejoin(r, r + 1, RejoinRequest{0, 100, "gloo: connection closed"},
                [](absl::StatusOr<RankAssignment>) {});
  }
  for (int l = 0; l < 2; ++l) {
    WorkerIdentity w;
    w.host = "n2";
    w.node_rank = 1;
    w.local_rank = l;
    w.pid = 200 + l;
    job->Register(w, [](absl::StatusOr<RankAssignment>) {});
  }
  s = job->Status();
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.membership_generation, 1);
  EXPECT_EQ(s.ranks[2].host, "n2");
}

}  // namespace
}  // namespace ddp
