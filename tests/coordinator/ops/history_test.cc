#include "coordinator/ops/history.h"

#include <algorithm>
#include <string>
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

// Each sample keeps the time use of its status (cumulative seconds by use); the JSON has one
// array per use, as many values as samples, and decimation keeps them with their samples.
TEST(HistoryTest, KeepsTheTimeUseOfEachSample) {
  History h(8, 1.0);
  for (int i = 1; i <= 20; ++i) {
    // The last one ends the job: always sampled.
    JobStatus s = At(i, i, i == 20 ? JobState::kSucceeded : JobState::kRunning);
    s.time_use.wall = i;
    s.time_use.startup = 1;
    s.time_use.training = i - 1;
    s.time_use.stall = i == 20 ? 0.5 : 0;
    h.Add(s);
  }
  const std::vector<History::Sample> samples = h.Samples();
  ASSERT_FALSE(samples.empty());
  EXPECT_LT(samples.size(), 8u);
  for (const History::Sample& x : samples) {
    EXPECT_EQ(x.time_use.wall, x.t);
    EXPECT_EQ(x.time_use.training, x.t - 1);
  }
  EXPECT_EQ(samples.back().time_use.stall, 0.5);
  const std::string json = h.ToJson();
  EXPECT_THAT(json, HasSubstr("\"time_use\":{\"wall\":[1,"));
  EXPECT_THAT(json, HasSubstr("\"training\":[0,"));
  EXPECT_THAT(json, HasSubstr("\"stalls\":[0,"));
  EXPECT_THAT(json, HasSubstr(",0.5],\"checkpoints\":["));
  for (const char* use : {"startup", "recoveries", "evaluation", "other"}) {
    EXPECT_THAT(json, HasSubstr(std::string("\"") + use + "\":[")) << use;
  }
  // As many values per use as samples: count the training array's commas.
  const size_t at = json.find("\"training\":[");
  const std::string training = json.substr(at, json.find(']', at) - at);
  EXPECT_EQ(static_cast<size_t>(std::count(training.begin(), training.end(), ',')) + 1,
            samples.size());
}

TEST(HistoryTest, EmptyHistoryHasEmptyTimeUse) {
  History h(8, 1.0);
  EXPECT_THAT(h.ToJson(), HasSubstr("\"time_use\":{\"wall\":[],\"training\":[],"));
}

}  // namespace
}  // namespace ddp
