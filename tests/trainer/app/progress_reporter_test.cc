// ProgressReporter: the phase marks a heartbeat carries, the stop signal it reports, and the
// process exits it forces when the training thread cannot act (EXIT, an unacknowledged ABORT).
#include "trainer/app/progress_reporter.h"

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/exit_codes.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

// Answers heartbeats with `reply` and keeps the reports; nothing else is used.
class FakeApi : public CoordinatorApi {
 public:
  explicit FakeApi(HeartbeatReply reply = {}) : reply_(std::move(reply)) {}

  absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport& progress) override {
    absl::MutexLock lock(&mu_);
    reports_.push_back(progress);
    return reply_;
  }
  std::optional<ProgressReport> last() {
    absl::MutexLock lock(&mu_);
    if (reports_.empty()) return std::nullopt;
    return reports_.back();
  }

  absl::StatusOr<RankAssignment> Register(const WorkerIdentity&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::Status StoreSet(const std::string&, const std::vector<uint8_t>&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::vector<uint8_t>> StoreGet(const std::string&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<int64_t> StoreAdd(const std::string&, int64_t) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::vector<uint8_t>> StoreCompareSet(const std::string&,
                                                       const std::vector<uint8_t>&,
                                                       const std::vector<uint8_t>&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<bool> StoreDelete(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<bool> StoreCheck(const std::vector<std::string>&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<int64_t> StoreNumKeys() override { return absl::UnimplementedError(""); }
  absl::Status StoreWait(const std::vector<std::string>&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<ShardAssignment> GetShard(const ShardRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::Status CommitCheckpoint(const CommittedCheckpoint&) override {
    return absl::UnimplementedError("");
  }
  absl::Status ReportDone(const absl::Status&) override { return absl::UnimplementedError(""); }
  absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<LostDecision> ReportLost(const LostWorker&) override {
    return absl::UnimplementedError("");
  }

 private:
  const HeartbeatReply reply_;
  absl::Mutex mu_;
  std::vector<ProgressReport> reports_ ABSL_GUARDED_BY(mu_);
};

ProgressReporterOptions Options() {
  ProgressReporterOptions o;
  o.period = absl::Milliseconds(50);
  o.abort_grace = absl::Milliseconds(300);
  return o;
}

TEST(ProgressReporter, AHeartbeatCarriesThePhaseAndTheTimeInIt) {
  FakeApi api;
  ProgressReporter reporter(&api, Options());
  reporter.Flush();
  ASSERT_TRUE(api.last().has_value());
  EXPECT_EQ(api.last()->step_phase, StepPhase::kNone) << "nothing marked yet";

  reporter.MarkPhase(StepPhase::kData);
  absl::SleepFor(absl::Milliseconds(300));
  reporter.Flush();
  EXPECT_EQ(api.last()->step_phase, StepPhase::kData);
  EXPECT_GE(api.last()->phase_seconds, 0.3);
  EXPECT_LT(api.last()->phase_seconds, 10);

  // An Update's own phase fields do not win over the marks.
  ProgressReport r;
  r.step = 7;
  reporter.Update(r);
  reporter.MarkPhase(StepPhase::kForward);
  reporter.Flush();
  EXPECT_EQ(api.last()->step, 7);
  EXPECT_EQ(api.last()->step_phase, StepPhase::kForward);
  EXPECT_LT(api.last()->phase_seconds, 0.3);
}

TEST(ProgressReporter, ACollectiveWaitReadsAllreduceThenThePhaseItInterrupted) {
  FakeApi api;
  ProgressReporter reporter(&api, Options());
  reporter.MarkPhase(StepPhase::kBackward);
  reporter.MarkCollectiveWait(true);
  absl::SleepFor(absl::Milliseconds(200));
  reporter.Flush();
  EXPECT_EQ(api.last()->step_phase, StepPhase::kAllreduce);
  EXPECT_GE(api.last()->phase_seconds, 0.2);
  reporter.MarkCollectiveWait(false);
  reporter.Flush();
  EXPECT_EQ(api.last()->step_phase, StepPhase::kBackward);
  EXPECT_LT(api.last()->phase_seconds, 0.2);
}

TEST(ProgressReporter, AStopSignalIsReported) {
  FakeApi api;
  std::atomic<bool> signaled{false};
  ProgressReporter reporter(&api, Options());
  reporter.WatchStopSignal(&signaled);
  reporter.Flush();
  EXPECT_FALSE(api.last()->stop_signaled);
  signaled.store(true);
  reporter.Flush();
  EXPECT_TRUE(api.last()->stop_signaled);
}

TEST(ProgressReporter, ANewerGenerationIsAnnouncedOnceAndAPhaseMarkedDuringRecoveryIsSent) {
  HeartbeatReply newer;
  newer.membership_generation = 2;
  FakeApi api(newer);
  ProgressReporter reporter(&api, Options());
  reporter.SetOwnGeneration(1);
  std::atomic<int> calls{0};
  reporter.OnNewerGeneration([&calls] { calls.fetch_add(1); });
  reporter.Flush();
  reporter.Flush();
  EXPECT_EQ(reporter.announced_generation(), 2);
  EXPECT_TRUE(reporter.newer_generation());
  EXPECT_EQ(calls.load(), 1) << "once per generation";
  reporter.MarkPhase(StepPhase::kRecovery);
  reporter.Flush();
  EXPECT_EQ(api.last()->step_phase, StepPhase::kRecovery);
  reporter.SetOwnGeneration(2);
  EXPECT_FALSE(reporter.newer_generation());
}

TEST(ProgressReporterDeathTest, ExitEndsTheProcessWithTheCoordinatorsCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HeartbeatReply exit;
  exit.command = Command::kExit;
  exit.exit_code = kExitResumable;
  exit.reason = "graceful stop not completed within 20s: rank 1 stuck in data";
  EXPECT_EXIT(
      {
        FakeApi api(exit);
        ProgressReporter reporter(&api, Options());
        absl::SleepFor(absl::Seconds(10));  // a training thread that never acts
      },
      ::testing::ExitedWithCode(kExitResumable), "rank 1 stuck in data");
}

TEST(ProgressReporterDeathTest, AnAbortTheTrainingThreadCannotActOnEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HeartbeatReply abort;
  abort.command = Command::kAbort;
  abort.cause = {1, FailureKind::kStall, "rank 1 stalled in data for 6.0s"};
  EXPECT_EXIT(
      {
        FakeApi api(abort);
        ProgressReporter reporter(&api, Options());
        absl::SleepFor(absl::Seconds(10));
      },
      ::testing::ExitedWithCode(kExitAborted), "aborting: rank 1 stalled in data");
}

}  // namespace
}  // namespace ddp
