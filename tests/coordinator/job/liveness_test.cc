#include "coordinator/job/liveness.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

ProgressReport At(WorkerPhase phase, int64_t step) {
  ProgressReport p;
  p.phase = phase;
  p.step = step;
  return p;
}

TEST(LivenessTest, StateFollowsThePhaseUntilFinal) {
  struct Case {
    WorkerPhase phase;
    RankState want;
  };
  const std::vector<Case> cases = {
      {WorkerPhase::kStarting, RankState::kStarting},
      {WorkerPhase::kTraining, RankState::kTraining},
      {WorkerPhase::kEvaluating, RankState::kEvaluating},
      {WorkerPhase::kCheckpointing, RankState::kCheckpointing},
      {WorkerPhase::kFinished, RankState::kFinished},
  };
  Liveness live(absl::Seconds(10), absl::InfiniteDuration(), kT0);
  live.Start(2, kT0);
  for (const Case& c : cases) {
    EXPECT_EQ(RankStateOf(c.phase), c.want);
    live.Beat(0, At(c.phase, 5), kT0, /*aborting=*/false);
    EXPECT_EQ(live.Sample(0, kT0).state, c.want);
  }
  // While the job aborts, the state no longer follows; progress is still recorded.
  live.Beat(1, At(WorkerPhase::kTraining, 1), kT0, /*aborting=*/false);
  live.Beat(1, At(WorkerPhase::kEvaluating, 2), kT0, /*aborting=*/true);
  EXPECT_EQ(live.Sample(1, kT0).state, RankState::kTraining);
  EXPECT_EQ(live.Sample(1, kT0).progress.step, 2);
  // A final state is sticky.
  ASSERT_TRUE(live.Finish(1, RankState::kLost, /*reported=*/false, kT0));
  live.Beat(1, At(WorkerPhase::kTraining, 3), kT0, false);
  EXPECT_EQ(live.Sample(1, kT0).state, RankState::kLost);
}

TEST(LivenessTest, AReportIsTakenOnce) {
  Liveness live(absl::Seconds(10), absl::InfiniteDuration(), kT0);
  live.Start(1, kT0);
  // Lost first (its launcher saw it die), then its own report arrives: the report counts.
  EXPECT_TRUE(live.Finish(0, RankState::kLost, /*reported=*/false, kT0));
  EXPECT_TRUE(live.Finish(0, RankState::kFailed, /*reported=*/true, kT0 + absl::Seconds(1)));
  EXPECT_EQ(live.Sample(0, kT0 + absl::Seconds(1)).since_seen, absl::ZeroDuration());
  // A retry of the report changes nothing.
  EXPECT_FALSE(live.Finish(0, RankState::kDone, /*reported=*/true, kT0 + absl::Seconds(2)));
  EXPECT_EQ(live.Sample(0, kT0).state, RankState::kFailed);
}

TEST(LivenessTest, TheFirstSilentRankIsLostOnce) {
  Liveness live(absl::Seconds(10), absl::InfiniteDuration(), kT0);
  live.Start(3, kT0);
  live.Beat(0, At(WorkerPhase::kTraining, 1), kT0 + absl::Seconds(5), false);
  EXPECT_FALSE(live.TakeSilent(kT0 + absl::Seconds(10)).has_value()) << "exactly the timeout";
  auto silent = live.TakeSilent(kT0 + absl::Seconds(11));
  ASSERT_TRUE(silent.has_value());
  EXPECT_EQ(silent->rank, 1);
  EXPECT_EQ(silent->silent, absl::Seconds(11));
  EXPECT_EQ(live.Sample(1, kT0).state, RankState::kLost);
  silent = live.TakeSilent(kT0 + absl::Seconds(11));
  ASSERT_TRUE(silent.has_value());
  EXPECT_EQ(silent->rank, 2);
  EXPECT_FALSE(live.TakeSilent(kT0 + absl::Seconds(11)).has_value());
  // A rank that finished is never silent.
  ASSERT_TRUE(live.Finish(0, RankState::kDone, true, kT0 + absl::Seconds(11)));
  EXPECT_FALSE(live.TakeSilent(kT0 + absl::Seconds(100)).has_value());
}

TEST(LivenessTest, TimeTheCoordinatorWasNotRunningIsNotSilence) {
  struct Case {
    const char* name;
    absl::Duration threshold;
    std::vector<absl::Duration> ticks;  // gaps between ticks
    bool want_forgiven;                 // the last gap was forgiven
    absl::Duration want_since_seen;     // rank 0 (never beats) after the ticks
  };
  const std::vector<Case> cases = {
      {"regular ticks",
       absl::Seconds(2),
       {absl::Seconds(1), absl::Seconds(1)},
       false,
       absl::Seconds(2)},
      {"a 30 s stall",
       absl::Seconds(2),
       {absl::Seconds(1), absl::Seconds(30)},
       true,
       absl::Seconds(1)},
      {"exactly the threshold", absl::Seconds(2), {absl::Seconds(2)}, false, absl::Seconds(2)},
      {"no threshold", absl::InfiniteDuration(), {absl::Seconds(30)}, false, absl::Seconds(30)},
  };
  for (const Case& c : cases) {
    Liveness live(absl::Seconds(10), c.threshold, kT0);
    live.Start(1, kT0);
    absl::Time now = kT0;
    std::optional<absl::Duration> gap;
    for (absl::Duration d : c.ticks) {
      now += d;
      gap = live.ObserveTick(now);
    }
    EXPECT_EQ(gap.has_value(), c.want_forgiven) << c.name;
    if (c.want_forgiven) {
      EXPECT_EQ(*gap, c.ticks.back()) << c.name;
    }
    EXPECT_EQ(live.Sample(0, now).since_seen, c.want_since_seen) << c.name;
  }
}

TEST(LivenessTest, ForgivenessNeverMovesAHeartbeatIntoTheFuture) {
  Liveness live(absl::Seconds(10), absl::Seconds(2), kT0);
  live.Start(1, kT0);
  // A heartbeat arrived after the stall, before the tick that notices it.
  live.Beat(0, At(WorkerPhase::kTraining, 1), kT0 + absl::Seconds(30), false);
  ASSERT_TRUE(live.ObserveTick(kT0 + absl::Seconds(30)).has_value());
  EXPECT_EQ(live.Sample(0, kT0 + absl::Seconds(30)).since_seen, absl::ZeroDuration());
}

}  // namespace
}  // namespace ddp
