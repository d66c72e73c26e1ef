// The fixture of the Job recovery tests (job_recovery_test.cc, job_node_loss_test.cc): a 2x2
// job against a fake clock, and calls that record their asynchronous replies.
#ifndef SLURM_DDP_TESTS_COORDINATOR_JOB_RECOVERY_FIXTURE_H_
#define SLURM_DDP_TESTS_COORDINATOR_JOB_RECOVERY_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/job/job.h"
#include "gtest/gtest.h"

namespace ddp {

inline WorkerIdentity Who(int node, int local, int pid) {
  WorkerIdentity w;
  w.host = absl::StrCat("host", node);
  w.node_rank = node;
  w.local_rank = local;
  w.local_world_size = 2;
  w.pid = pid;
  w.nonce = "n";
  return w;
}

inline LostWorker Killed(int node, int local, int pid) {
  return LostWorker{node, local, pid, "killed by signal 9", 9, 0};
}

using Reply = absl::StatusOr<RankAssignment>;

class JobRecoveryTest : public ::testing::Test {
 protected:
  // A 2x2 job (pids 10..13 for ranks 0..3), RUNNING.
  std::unique_ptr<Job> Running(int max_restarts, int min_nodes = 0) {
    JobConfig c;
    c.min_nodes = min_nodes;
    c.job_id = "j";
    c.nonce = "n";
    c.world_size = 4;
    c.registration_timeout = absl::Seconds(30);
    c.heartbeat_timeout = absl::Seconds(10);
    c.max_restarts = max_restarts;
    c.recovery_timeout = absl::Seconds(20);
    auto job = std::make_unique<Job>(c, &clock_);
    for (int r = 0; r < 4; ++r) Register(*job, Who(r / 2, r % 2, 10 + r));
    EXPECT_EQ(job->Status().state, JobState::kRunning);
    return job;
  }
  std::shared_ptr<Reply> Register(Job& job, const WorkerIdentity& who) {
    auto reply = std::make_shared<Reply>(absl::UnknownError("no reply"));
    job.Register(who, [reply](Reply r) { *reply = std::move(r); });
    return reply;
  }
  std::shared_ptr<Reply> Rejoin(Job& job, int rank, int64_t step, int64_t generation = 0) {
    auto reply = std::make_shared<Reply>(absl::UnknownError("no reply"));
    RejoinRequest req;
    req.membership_generation = generation;
    req.committed_step = step;
    req.reason = "Connection reset by peer";
    job.Rejoin(rank, 10 + rank, req, [reply](Reply r) { *reply = std::move(r); });
    return reply;
  }
  static bool Waiting(const std::shared_ptr<Reply>& r) { return absl::IsUnknown(r->status()); }
  // `seconds` pass one at a time; each second the ranks in `beating` heartbeat, `each` runs (a
  // spare standing by, say) and the job ticks.
  void Pass(Job& job, int seconds, const std::vector<int>& beating,
            const std::function<void()>& each = nullptr) {
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(absl::Seconds(1));
      for (int r : beating) ASSERT_TRUE(job.Heartbeat(r, 10 + r, {}).ok()) << "rank " << r;
      if (each) each();
      job.Tick();
    }
  }
  FakeClock clock_;
};

}  // namespace ddp

#endif  // SLURM_DDP_TESTS_COORDINATOR_JOB_RECOVERY_FIXTURE_H_
