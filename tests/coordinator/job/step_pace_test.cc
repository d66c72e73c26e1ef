#include "coordinator/job/step_pace.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST(StepPaceTest, NoSampleBeforeARankAdvances) {
  StepPace pace(2);
  EXPECT_FALSE(pace.median());
  pace.Observe(0, 5, At(0));
  pace.Observe(0, 5, At(3));  // no step: no sample
  EXPECT_FALSE(pace.median());
}

TEST(StepPaceTest, SamplesAreTimePerStepBetweenObservations) {
  struct Case {
    const char* name;
    std::vector<std::pair<double, int64_t>> observations;  // (time, step) of rank 0
    absl::Duration want;
  };
  const std::vector<Case> cases = {
      {"one step per heartbeat", {{0, 1}, {2, 2}, {4, 3}}, absl::Seconds(2)},
      {"many steps per heartbeat", {{0, 1}, {1, 11}, {2, 21}}, absl::Milliseconds(100)},
      {"median ignores one slow interval (evaluation)",
       {{0, 1}, {1, 2}, {2, 3}, {62, 4}, {63, 5}},
       absl::Seconds(1)},
      {"a step that goes back restarts without a sample",
       {{0, 10}, {1, 20}, {5, 2}, {6, 12}},
       absl::Milliseconds(100)},
  };
  for (const Case& c : cases) {
    StepPace pace(1);
    for (const auto& [t, step] : c.observations) pace.Observe(0, step, At(t));
    ASSERT_TRUE(pace.median()) << c.name;
    EXPECT_EQ(*pace.median(), c.want) << c.name;
  }
}

TEST(StepPaceTest, MedianIsOverTheLastWindowOfAllRanks) {
  StepPace pace(2);
  pace.Observe(0, 0, At(0));
  pace.Observe(1, 0, At(0));
  double t = 0;
  int64_t step = 0;
  // A long slow start on rank 0 (10 s per step) ...
  for (size_t i = 0; i < StepPace::kWindow; ++i) pace.Observe(0, ++step, At(t += 10));
  EXPECT_EQ(*pace.median(), absl::Seconds(10));
  // ... then rank 1 runs at 1 s per step for a whole window: the old samples are gone.
  int64_t step1 = 0;
  double t1 = 0;
  for (size_t i = 0; i < StepPace::kWindow; ++i) pace.Observe(1, ++step1, At(t1 += 1));
  EXPECT_EQ(*pace.median(), absl::Seconds(1));
}

TEST(StepPaceTest, ResetForgetsTheRankAndOutOfRangeIsIgnored) {
  StepPace pace(1);
  pace.Observe(0, 1, At(0));
  pace.Reset(0);
  pace.Observe(0, 50, At(1));  // first observation again: no sample from step 1 to 50
  EXPECT_FALSE(pace.median());
  pace.Observe(-1, 3, At(2));
  pace.Observe(7, 3, At(2));
  pace.Reset(9);
  EXPECT_FALSE(pace.median());
}

}  // namespace
}  // namespace ddp
