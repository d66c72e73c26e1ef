#include "coordinator/ops/history.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

JobStatus At(double t, int64_t step, JobState state = JobState::kRunning) {
  JobStatus s;
  s.state = state;
  s.finished = IsTerminal(state);
  s.uptime_seconds = t;
  s.step = step;
  s.loss = 1.0;
  return s;
}

TEST(HistoryTest, WhatGetsSampled) {
  struct Case {
    const char* name;
    std::vector<JobStatus> statuses;
    size_t want_samples;
  };
  const std::vector<Case> cases = {
      {"registering is skipped", {At(1, 0, JobState::kRegistering)}, 0},
      {"no progress yet is skipped",
       {[] {
         JobStatus s = At(1, 0);
         s.loss = 0;
         return s;
       }()},
       0},
      {"one per interval", {At(1, 1), At(1.5, 2), At(2, 3), At(3.2, 4)}, 3},
      {"the end is always sampled, then nothing",
       {At(1, 1), At(1.1, 2, JobState::kSucceeded), At(5, 3)},
       2},
  };
  for (const Case& c : cases) {
    History h(100, 1.0);
    for (const JobStatus& s : c.statuses) h.Add(s);
    EXPECT_EQ(h.Samples().size(), c.want_samples) << c.name;
  }
}

TEST(HistoryTest, StaysBoundedAndSpansTheRun) {
  History h(8, 1.0);
  for (int i = 1; i <= 1000; ++i) h.Add(At(i, i));
  const std::vector<History::Sample> samples = h.Samples();
  EXPECT_LT(samples.size(), 8u);
  EXPECT_EQ(samples.front().t, 1);
  EXPECT_GT(samples.back().t, 500);
  EXPECT_THAT(h.ToJson(), HasSubstr("\"interval_seconds\":"));
  EXPECT_THAT(h.ToJson(), HasSubstr("\"step\":[1,"));
}

}  // namespace
}  // namespace ddp
