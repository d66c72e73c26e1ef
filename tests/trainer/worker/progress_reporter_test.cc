// ProgressReporter: the phase marks a heartbeat carries, the stop signal it reports, how long the
// coordinator has been unreachable and when it is lost (--coordinator-grace), and the process
// exits it forces when the training thread cannot act (EXIT, an unacknowledged ABORT, a stop for
// a lost coordinator past its --stop-timeout).
#include "trainer/worker/progress_reporter.h"

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
    // A stuck call stays in flight until released (or 10 s, a test's bound).
    auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !stuck_; };
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Seconds(10));
    if (failing_) return absl::UnavailableError("coordinator unreachable");
    return reply_;
  }
  // Heartbeats fail (UNAVAILABLE) from now on, or are answered again.
  void SetFailing(bool failing) {
    absl::MutexLock lock(&mu_);
    failing_ = failing;
  }
  // Heartbeats stay in flight from now on, or are released.
  void SetStuck(bool stuck) {
    absl::MutexLock lock(&mu_);
    stuck_ = stuck;
  }
  size_t sent() {
    absl::MutexLock lock(&mu_);
    return reports_.size();
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
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  bool stuck_ ABSL_GUARDED_BY(mu_) = false;
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

// Straggler detection's input: each phase's time goes to its step section, a collective wait to
// communication (and ending it is no new step), checkpoint and eval to none.
TEST(ProgressReporter, HeartbeatsCarryTheTimeInEachSectionOfTheSteps) {
  FakeApi api;
  ProgressReporter reporter(&api, Options());
  for (int step = 0; step < 2; ++step) {
    reporter.MarkPhase(StepPhase::kData);
    absl::SleepFor(absl::Milliseconds(20));
    reporter.MarkPhase(StepPhase::kForward);
    absl::SleepFor(absl::Milliseconds(30));
    reporter.MarkPhase(StepPhase::kBackward);
    absl::SleepFor(absl::Milliseconds(30));
    reporter.MarkCollectiveWait(true);
    absl::SleepFor(absl::Milliseconds(50));
    reporter.MarkCollectiveWait(false);
    reporter.MarkPhase(StepPhase::kOptimizer);
    absl::SleepFor(absl::Milliseconds(10));
    reporter.MarkCollectiveWait(true);  // the loop's stop agreement after the step
    absl::SleepFor(absl::Milliseconds(10));
    reporter.MarkCollectiveWait(false);
  }
  reporter.MarkPhase(StepPhase::kCheckpoint);
  absl::SleepFor(absl::Milliseconds(200));
  reporter.MarkPhase(StepPhase::kEval);
  absl::SleepFor(absl::Milliseconds(200));
  reporter.MarkPhase(StepPhase::kData);
  reporter.Flush();
  const SectionTotals t = api.last()->sections;
  EXPECT_EQ(t.steps, 2);
  auto at = [&t](StepSection s) { return t.seconds[static_cast<int>(s)]; };
  EXPECT_GE(at(StepSection::kData), 0.040);
  EXPECT_GE(at(StepSection::kCompute), 0.120);
  EXPECT_GE(at(StepSection::kCommunication), 0.120);
  EXPECT_GE(at(StepSection::kOptimizer), 0.020);
  // Nothing of the 0.4 s in checkpoint and eval counts (generous bounds for a loaded machine).
  const double total = at(StepSection::kData) + at(StepSection::kCompute) +
                       at(StepSection::kCommunication) + at(StepSection::kOptimizer);
  EXPECT_LT(total, 0.300 + 0.25);
  EXPECT_LT(at(StepSection::kOptimizer), 0.15);
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

// A survivor blocked in a collective after a newer generation was announced (its peer was
// fenced, and still the collective did not fail) ends itself at the rejoin grace, so that its
// launcher replaces it.
TEST(ProgressReporterDeathTest, ASurvivorStillInACollectiveAfterTheRejoinGraceEndsItself) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  HeartbeatReply newer;
  newer.membership_generation = 2;
  EXPECT_EXIT(
      {
        FakeApi api(newer);
        ProgressReporterOptions o = Options();
        o.rejoin_grace = absl::Milliseconds(300);
        ProgressReporter reporter(&api, o);
        reporter.SetOwnGeneration(1);
        reporter.MarkPhase(StepPhase::kBackward);
        reporter.MarkCollectiveWait(true);  // and never returns
        absl::SleepFor(absl::Seconds(10));
      },
      ::testing::ExitedWithCode(kExitFailed),
      "still waiting in a collective .* after membership generation 2 was announced");
}

// One that left its collective (rejoining, phase recovery) or has no newer generation to go to
// is never ended for it.
TEST(ProgressReporter, ARankThatLeftItsCollectiveOrHasNoNewerGenerationIsNotEnded) {
  HeartbeatReply newer;
  newer.membership_generation = 2;
  FakeApi api(newer);
  ProgressReporterOptions o = Options();
  o.rejoin_grace = absl::Milliseconds(100);
  ProgressReporter reporter(&api, o);
  reporter.SetOwnGeneration(1);
  reporter.MarkPhase(StepPhase::kRecovery);  // Rejoin may wait long for the generation
  absl::SleepFor(absl::Milliseconds(500));
  HeartbeatReply same;
  FakeApi quiet(same);
  ProgressReporter other(&quiet, o);
  other.MarkCollectiveWait(true);  // a long collective of an undisturbed job
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(reporter.newer_generation()) << "still alive, still rejoining";
}

// Waits up to `limit` for `done`; returns how long it took.
template <typename Done>
absl::Duration WaitFor(Done done, absl::Duration limit = absl::Seconds(5)) {
  const absl::Time start = absl::Now();
  while (!done() && absl::Now() - start < limit) absl::SleepFor(absl::Milliseconds(5));
  return absl::Now() - start;
}

ProgressReporterOptions Grace(absl::Duration grace) {
  ProgressReporterOptions o = Options();
  o.coordinator_grace = grace;
  return o;
}

TEST(ProgressReporterUnreachable, AnsweredHeartbeatsKeepTheCoordinatorReachable) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Milliseconds(200)));
  absl::SleepFor(absl::Milliseconds(500));  // ten periods, more than the grace
  EXPECT_GE(api.sent(), 3u);
  EXPECT_LT(reporter.unanswered_for(), absl::Milliseconds(100));
  EXPECT_FALSE(reporter.coordinator_silent());
  EXPECT_FALSE(reporter.coordinator_lost());
}

TEST(ProgressReporterUnreachable, FailingHeartbeatsLoseTheCoordinatorAfterTheGraceForGood) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Milliseconds(400)));
  reporter.Flush();
  api.SetFailing(true);
  const absl::Time failing_since = absl::Now();
  WaitFor([&] { return reporter.unanswered_for() > absl::ZeroDuration(); });
  EXPECT_FALSE(reporter.coordinator_lost()) << "within the grace";
  WaitFor([&] { return reporter.coordinator_silent(); });
  EXPECT_FALSE(reporter.coordinator_lost()) << "silent (3 periods) before lost";
  WaitFor([&] { return reporter.coordinator_lost(); });
  const absl::Duration lost_after = absl::Now() - failing_since;
  EXPECT_TRUE(reporter.coordinator_lost());
  EXPECT_GE(lost_after, absl::Milliseconds(400));
  EXPECT_LT(lost_after, absl::Milliseconds(400) + absl::Seconds(1));
  EXPECT_GE(reporter.unanswered_for(), absl::Milliseconds(400));

  // Once lost, nothing more is sent, and an answer that would come later changes nothing.
  const size_t sent = api.sent();
  api.SetFailing(false);
  absl::SleepFor(absl::Milliseconds(300));
  reporter.Flush();
  EXPECT_EQ(api.sent(), sent);
  EXPECT_TRUE(reporter.coordinator_lost());
  EXPECT_FALSE(reporter.abort_reason().has_value()) << "a lost coordinator is not an abort";
}

TEST(ProgressReporterUnreachable, AnAnswerWithinTheGraceEndsTheUnreachableTime) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Seconds(2)));
  api.SetFailing(true);
  WaitFor([&] { return reporter.unanswered_for() > absl::Milliseconds(300); });
  EXPECT_GT(reporter.unanswered_for(), absl::Milliseconds(300));
  api.SetFailing(false);
  WaitFor([&] { return reporter.unanswered_for() < absl::Milliseconds(100); });
  EXPECT_LT(reporter.unanswered_for(), absl::Milliseconds(100)) << "continuous time only";
  EXPECT_FALSE(reporter.coordinator_lost());
}

TEST(ProgressReporterUnreachable, AHeartbeatStuckInFlightCountsFromItsSending) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Milliseconds(300)));
  reporter.Flush();
  api.SetStuck(true);  // the next heartbeat never returns while the test looks
  const absl::Time stuck_since = absl::Now();
  WaitFor([&] { return reporter.coordinator_lost(); });
  EXPECT_TRUE(reporter.coordinator_lost()) << "lost while the call is still in flight";
  EXPECT_LT(absl::Now() - stuck_since, absl::Milliseconds(300) + absl::Seconds(1));
  api.SetStuck(false);
}

TEST(ProgressReporterUnreachable, TimeThisProcessWasStoppedIsNotTheCoordinators) {
  FakeApi api;
  ProgressReporterOptions o = Grace(absl::Milliseconds(300));
  o.heartbeat_deadline = absl::Milliseconds(50);
  o.suspend_margin = absl::Milliseconds(150);
  ProgressReporter reporter(&api, o);
  reporter.Flush();
  // A heartbeat in flight far past its deadline (what a SIGSTOPped process sees once continued):
  // no verdict until it ends.
  api.SetFailing(true);
  api.SetStuck(true);
  WaitFor([&] { return reporter.unanswered_for() > absl::Milliseconds(600); });
  EXPECT_FALSE(reporter.coordinator_lost()) << "a call past its deadline is no evidence";
  api.SetStuck(false);  // it fails: the unreachable time starts again at its end
  WaitFor([&] { return reporter.unanswered_for() < absl::Milliseconds(200); });
  EXPECT_LT(reporter.unanswered_for(), absl::Milliseconds(200));
  EXPECT_FALSE(reporter.coordinator_lost());
  // Failures that go on (each within its deadline) lose it a grace later.
  const absl::Time restarted = absl::Now();
  WaitFor([&] { return reporter.coordinator_lost(); });
  EXPECT_TRUE(reporter.coordinator_lost());
  EXPECT_GE(absl::Now() - restarted, absl::Milliseconds(90));
}

TEST(ProgressReporterUnreachable, ACallThatFoundItUnreachableMakesItSilentUntilAnAnswer) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Seconds(60)));
  reporter.Flush();
  EXPECT_FALSE(reporter.coordinator_silent());
  reporter.NoteUnreachable();
  EXPECT_TRUE(reporter.coordinator_silent());
  EXPECT_FALSE(reporter.coordinator_lost()) << "only the grace loses it";
  reporter.Flush();  // answered
  EXPECT_FALSE(reporter.coordinator_silent());
}

TEST(ProgressReporterUnreachable, APeersVerdictLosesTheCoordinatorAndEndsTheHeartbeats) {
  FakeApi api;
  ProgressReporter reporter(&api, Grace(absl::Seconds(60)));
  reporter.Flush();
  reporter.MarkCoordinatorLost();
  EXPECT_TRUE(reporter.coordinator_lost());
  EXPECT_TRUE(reporter.coordinator_silent());
  const size_t sent = api.sent();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_LE(api.sent(), sent + 1) << "at most the heartbeat already on its way";
}

TEST(ProgressReporterDeathTest, ALostCoordinatorsStopPastItsTimeoutEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        FakeApi api;
        api.SetFailing(true);
        ProgressReporterOptions o = Grace(absl::Milliseconds(100));
        o.lost_stop_timeout = absl::Milliseconds(300);
        ProgressReporter reporter(&api, o);
        absl::SleepFor(absl::Seconds(10));  // a training thread that never ends the stop
      },
      ::testing::ExitedWithCode(kExitAborted),
      "the coordinator was lost \\(unreachable for .*\\) and the stop did not complete within "
      "--stop-timeout");
}

}  // namespace
}  // namespace ddp
