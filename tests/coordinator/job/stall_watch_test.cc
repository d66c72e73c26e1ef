#include "coordinator/job/stall_watch.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

RankSample Sample(StepPhase phase, double phase_seconds, double since_seen = 0,
                  RankState state = RankState::kTraining,
                  WorkerPhase worker = WorkerPhase::kTraining, int64_t step = 0) {
  RankSample s;
  s.state = state;
  s.progress.phase = worker;
  s.progress.step_phase = phase;
  s.progress.phase_seconds = phase_seconds;
  s.progress.step = step;
  s.since_seen = absl::Seconds(since_seen);
  return s;
}

StallOptions Budget(double seconds) {
  StallOptions o;
  o.timeout = absl::Seconds(seconds);
  return o;
}

TEST(StallWatchTest, ViewOfARank) {
  struct Case {
    const char* name;
    RankSample sample;
    double counted_since;  // CountFrom, seconds after kT0
    double now;
    bool want_working;
    double want_in_phase;
    bool want_first_step;
  };
  const std::vector<Case> cases = {
      {"reported time plus silence", Sample(StepPhase::kData, 10, 2), 0, 100, true, 12, false},
      {"capped at the count's start", Sample(StepPhase::kData, 50, 2), 90, 100, true, 10, false},
      {"a final rank does not work", Sample(StepPhase::kData, 1, 0, RankState::kDone), 0, 5, false,
       1, false},
      {"a finished rank does not work", Sample(StepPhase::kData, 1, 0, RankState::kFinished), 0, 5,
       false, 1, false},
      {"first step while starting",
       Sample(StepPhase::kForward, 3, 0, RankState::kStarting, WorkerPhase::kStarting), 0, 5, true,
       3, true},
  };
  for (const Case& c : cases) {
    StallWatch w(Budget(60), 1, kT0);
    w.CountFrom(At(c.counted_since));
    const RankView v = w.View(0, c.sample, At(c.now), /*observe=*/false);
    EXPECT_EQ(v.rank, 0) << c.name;
    EXPECT_EQ(v.working, c.want_working) << c.name;
    EXPECT_EQ(v.phase, c.sample.progress.step_phase) << c.name;
    EXPECT_EQ(v.in_phase, absl::Seconds(c.want_in_phase)) << c.name;
    EXPECT_EQ(v.first_step, c.want_first_step) << c.name;
  }
}

TEST(StallWatchTest, ChecksAtMostEveryPeriod) {
  StallWatch w(Budget(60), 1, kT0);
  struct Case {
    absl::Duration after;  // since kT0
    bool want;
  };
  const std::vector<Case> cases = {
      {absl::ZeroDuration(), true},         {StallWatch::kCheckPeriod / 2, false},
      {StallWatch::kCheckPeriod, true},     {StallWatch::kCheckPeriod * 3 / 2, false},
      {StallWatch::kCheckPeriod * 5, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(w.Due(kT0 + c.after), c.want) << c.after;
  }
}

TEST(StallWatchTest, JudgeReturnsOnlyNewStalls) {
  auto views = [](double r0, double r1) {
    StallWatch scratch(Budget(60), 3, kT0);
    return std::vector<RankView>{
        scratch.View(0, Sample(StepPhase::kData, r0), At(1000), false),
        scratch.View(1, Sample(StepPhase::kData, r1), At(1000), false),
        scratch.View(2, Sample(StepPhase::kAllreduce, 200), At(1000), false),
    };
  };
  struct Step {
    double rank0;  // seconds rank 0 (then rank 1) sits in data while rank 2 waits
    double rank1;
    std::vector<int> want_fresh;
    std::vector<int> want_all;
  };
  const std::vector<Step> steps = {
      {10, 10, {}, {}},       {70, 10, {0}, {0}},
      {80, 90, {1}, {1, 0}},  // longest first; rank 0 is known already
      {90, 100, {}, {1, 0}},  {5, 100, {}, {1}},
      {70, 100, {0}, {1, 0}},  // stalled again after it moved on
  };
  StallWatch w(Budget(60), 3, kT0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    std::vector<int> fresh;
    for (const Stall& st : w.Judge(views(s.rank0, s.rank1))) fresh.push_back(st.rank);
    std::vector<int> all;
    for (const Stall& st : w.stalls()) all.push_back(st.rank);
    EXPECT_EQ(fresh, s.want_fresh) << "step " << i;
    EXPECT_EQ(all, s.want_all) << "step " << i;
  }
}

TEST(StallWatchTest, ANewGenerationClearsAndRestartsTheCount) {
  StallWatch w(Budget(60), 2, kT0);
  std::vector<RankView> views = {w.View(0, Sample(StepPhase::kData, 100), At(200), false),
                                 w.View(1, Sample(StepPhase::kAllreduce, 100), At(200), false)};
  ASSERT_EQ(w.Judge(views).size(), 1u);
  w.NewGeneration(At(190));
  EXPECT_TRUE(w.stalls().empty());
  EXPECT_EQ(w.counted_since(), At(190));
  // The same reports now count 10 s at most: no stall.
  views = {w.View(0, Sample(StepPhase::kData, 100), At(200), false),
           w.View(1, Sample(StepPhase::kAllreduce, 100), At(200), false)};
  EXPECT_EQ(views[0].in_phase, absl::Seconds(10));
  EXPECT_TRUE(w.Judge(views).empty());
  // A stop held up by a holdout shows it as the stall.
  Stall holdout;
  holdout.rank = 1;
  w.Hold({holdout});
  ASSERT_EQ(w.stalls().size(), 1u);
  EXPECT_EQ(w.stalls().front().rank, 1);
}

TEST(StallWatchTest, ObservedStepsSetThePaceBudget) {
  // Without --stall-timeout the budget follows the pace: max(floor, 20 x median step).
  StallOptions options;
  options.floor = absl::Seconds(1);
  StallWatch w(options, 2, kT0);
  for (int i = 0; i <= 10; ++i) {
    w.View(0, Sample(StepPhase::kData, 0, 0, RankState::kTraining, WorkerPhase::kTraining, i),
           At(i), /*observe=*/true);
  }
  // Median step 1 s: budget 20 s. Rank 0 in data for 25 s while rank 1 waits: stalled.
  const std::vector<RankView> views = {
      w.View(0, Sample(StepPhase::kData, 25), At(100), false),
      w.View(1, Sample(StepPhase::kAllreduce, 25), At(100), false)};
  ASSERT_EQ(w.Judge(views).size(), 1u);
  EXPECT_EQ(w.stalls().front().budget, absl::Seconds(20));
  // A rank not observed (observe false, or its first step) leaves the pace alone.
  StallWatch fresh(options, 2, kT0);
  for (int i = 0; i <= 10; ++i) {
    fresh.View(0, Sample(StepPhase::kData, 0, 0, RankState::kTraining, WorkerPhase::kStarting, i),
               At(i), /*observe=*/true);
  }
  ASSERT_EQ(fresh.Judge(views).size(), 1u);
  EXPECT_EQ(fresh.stalls().front().budget, absl::Seconds(1));
}

}  // namespace
}  // namespace ddp
