// The worker's side of in-job recovery, in real processes on loopback (Gloo, 3 ranks): rank 2
// SIGKILLs itself between steps; the survivors' next step fails in its allreduce without being
// applied, InJobRecovery aborts the group, rejoins (an in-memory coordinator answers with the
// next generation: 2 ranks under a new store prefix), rebuilds the group, syncs, and training
// goes on; rank 0 prints the recovery line at the first step after it. Also: which failures are
// recoverable, a refused rejoin (the job failed), and the heartbeat that interrupts the stage.
#include "trainer/worker/in_job_recovery.h"

#include <signal.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/child_store.h"
#include "tests/testing/multiprocess.h"
#include "tests/trainer/ddp/fake_coordinator.h"
#include "tests/trainer/worker/worker_test_util.h"
#include "trainer/ddp/status_from_exception.h"

namespace ddp {
namespace {

constexpr int kWorld = 3;
constexpr int kBefore = 4;

// Answers Rejoin with a preset place (or error) and heartbeats with a preset generation.
class RejoiningCoordinator : public testing::FakeCoordinator {
 public:
  absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport&) override {
    HeartbeatReply r;
    r.membership_generation = announced.load();
    return r;
  }
  absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest& request, absl::Duration) override {
    absl::MutexLock lock(&mu);
    requests.push_back(request);
    return next;
  }
  std::atomic<int64_t> announced{0};
  absl::Mutex mu;
  std::vector<RejoinRequest> requests ABSL_GUARDED_BY(mu);
  absl::StatusOr<RankAssignment> next ABSL_GUARDED_BY(mu) = absl::UnknownError("unset");
};

struct Worker {
  explicit Worker(int rank) {
    auto api = std::make_unique<RejoiningCoordinator>();
    fake = api.get();
    RankAssignment a;
    a.rank = rank;
    a.world_size = kWorld;
    a.store_prefix = "m0";
    session = std::make_unique<CoordinatorSession>(std::move(api), a, ProgressReporterOptions{});
  }
  RejoiningCoordinator* fake;  // owned by the session
  std::unique_ptr<CoordinatorSession> session;
};

TEST(InJobRecovery, SurvivorsOfASigkilledPeerRejoinRebuildAndTrainOn) {
  if (!testing::IsChild()) {
    auto results = testing::RunRanks(kWorld, absl::Seconds(240));
    for (int r = 0; r < 2; ++r) {
      EXPECT_FALSE(results[r].timed_out) << "rank " << r << ":\n" << results[r].output;
      EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    }
    EXPECT_EQ(results[2].exit_code, -1) << "rank 2 dies by SIGKILL:\n" << results[2].output;
    EXPECT_NE(results[0].output.find("recovery 1: rank 2 (pid 7) killed by signal 9; restarts 1 "
                                     "of 3; membership generation 1 formed 0.25 s after the "
                                     "loss; state from rank 0 at step 4; training resumed at "
                                     "step 5"),
              std::string::npos)
        << results[0].output;
    // This rank's own path: the Rejoin's answer, the new group's build, the state sync.
    EXPECT_THAT(
        results[0].output,
        ::testing::ContainsRegex(
            "after this rank saw the failure \\(rejoin answered "
            "after [0-9]+\\.[0-9]+ s, process group built in "
            "[0-9]+\\.[0-9]+ s, state synced in [0-9]+\\.[0-9]+ s, DDP engine built in "
            "[0-9]+\\.[0-9]+ s\\) \\(first step: data 0\\.012 s, forward [0-9]+\\.[0-9]{3} s, "
            "backward [0-9]+\\.[0-9]{3} s, allreduce wait [0-9]+\\.[0-9]{3} s, "
            "optimizer [0-9]+\\.[0-9]{3} s\\) "
            "\\(unix time [0-9]+\\.[0-9]+\\)"));
    // The first committed step's hook ran once, on every rank that committed one.
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(results[r].output.find("first-step hook calls: 1\n"), std::string::npos)
          << "rank " << r << ":\n"
          << results[r].output;
    }
    EXPECT_EQ(results[1].output.find("recovery 1:"), std::string::npos) << "rank 0 only";
    return;
  }
  torch::set_num_threads(1);
  const int rank = testing::ChildRank();
  const testing::SmallRun c = testing::SmallConfig("mlp", 8 * kWorld * 12);
  DataStage data = testing::OpenData(c);
  ModelStage model = testing::BuildModel(c, data, c.data.seed);
  TrainingPosition at;
  Worker w(rank);
  auto store = testing::ChildFileStore();
  CommunicationStage comm(store, testing::GlooOptions(), model, at);
  int first_step_calls = 0;
  InJobRecovery::Options options;
  options.rejoin_timeout = absl::Seconds(60);
  options.max_restarts = 3;
  options.on_first_step = [&first_step_calls] { ++first_step_calls; };
  InJobRecovery recovery(comm, *w.session, at, options);
  ASSERT_TRUE(recovery.Connect().ok());
  auto loader = testing::LoaderAt(c, data, at, rank, kWorld);
  testing::TrainSteps(c, model, comm, at, *loader, kWorld, kBefore);
  if (rank == 2) raise(SIGKILL);

  // The survivors' next step meets the dead peer in its allreduce: not applied.
  StepRunner runner(model, comm, at, {});
  auto batch = loader->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  absl::Status failed = RunGuarded("step", [&] { return runner.Run(**batch, c.lr).status(); });
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(InJobRecovery::Recoverable(failed)) << failed;
  EXPECT_EQ(at.step, kBefore) << "the failed step was not applied";

  RankAssignment next;
  next.rank = rank;
  next.world_size = 2;
  next.membership_generation = 1;
  next.store_prefix = "m1";
  next.state_from_peers = true;
  next.restarts = 1;
  next.recovery_cause = {2, FailureKind::kSignal, "rank 2 (pid 7) killed by signal 9"};
  next.recovery_seconds = 0.25;
  {
    absl::MutexLock lock(&w.fake->mu);
    w.fake->next = next;
  }
  ASSERT_TRUE(recovery.Recover(failed).ok());
  EXPECT_EQ(recovery.recoveries(), 1);
  EXPECT_EQ(comm.prefix(), "m1");
  EXPECT_EQ(comm.process_group().getSize(), 2);
  EXPECT_EQ(w.session->rank().membership_generation, 1);
  EXPECT_FALSE(comm.interrupted());
  {
    absl::MutexLock lock(&w.fake->mu);
    ASSERT_EQ(w.fake->requests.size(), 1u);
    EXPECT_EQ(w.fake->requests[0].membership_generation, 0);
    EXPECT_EQ(w.fake->requests[0].committed_step, kBefore);
    EXPECT_FALSE(w.fake->requests[0].reason.empty());
  }
  // Training goes on in the new group from the synced position (the loop's resume rule).
  auto rest = testing::LoaderAt(c, data, at, rank, 2);
  testing::TrainSteps(c, model, comm, at, *rest, 2, 1);
  EXPECT_EQ(first_step_calls, 0);
  recovery.OnStepCommitted(/*data_seconds=*/0.012);
  recovery.OnStepCommitted();  // printed once
  std::printf("first-step hook calls: %d\n", first_step_calls);
  std::fflush(stdout);
  EXPECT_EQ(at.step, kBefore + 1);

  // A newer generation announced in a heartbeat interrupts the stage from the reporter thread.
  w.fake->announced.store(2);
  w.session->reporter().Flush();
  EXPECT_TRUE(w.session->reporter().newer_generation());
  EXPECT_TRUE(comm.interrupted());
  StepRunner after(model, comm, at, {});
  auto more = rest->Next();
  ASSERT_TRUE(more.ok() && more->has_value());
  absl::Status interrupted = RunGuarded("step", [&] { return after.Run(**more, c.lr).status(); });
  EXPECT_TRUE(absl::IsUnavailable(interrupted)) << interrupted;
  EXPECT_EQ(at.step, kBefore + 1) << "an interrupted step is not committed";

  // The job cannot recover: the coordinator's reason comes back as ABORTED.
  {
    absl::MutexLock lock(&w.fake->mu);
    w.fake->next = absl::AbortedError("Rejoin: rank 1 lost; restarts exhausted (3 of 3 used)");
  }
  absl::Status refused = recovery.Recover(interrupted);
  EXPECT_TRUE(absl::IsAborted(refused)) << refused;
  EXPECT_EQ(refused.message(), "rank 1 lost; restarts exhausted (3 of 3 used)");
}

TEST(InJobRecovery, WhichFailuresAreRecoverable) {
  struct Case {
    absl::Status status;
    bool want;
  };
  const std::vector<Case> cases = {
      {absl::UnavailableError("allreduce: Connection reset by peer"), true},
      {absl::DeadlineExceededError("store get timed out"), true},
      {absl::AbortedError("rank 3 killed by signal 9"), false},
      {absl::InternalError("bad input"), false},
      {absl::DataLossError("position record"), false},
      {absl::OkStatus(), false},
  };
  for (const Case& c : cases) EXPECT_EQ(InJobRecovery::Recoverable(c.status), c.want) << c.status;
}

}  // namespace
}  // namespace ddp
