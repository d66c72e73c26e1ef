#include "coordinator/ops/job_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RankStatus Rank(int rank, RankState state, int64_t step) {
  RankStatus r;
  r.rank = rank;
  r.host = "h";
  r.state = state;
  r.step = step;
  return r;
}

TEST(JobMetricsTest, RestartsCounterAndLastRecovery) {
  JobStatus s;
  s.state = JobState::kRunning;
  s.restarts = 2;
  s.max_restarts = 3;
  s.last_recovery_seconds = 1.25;
  std::string out;
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("# TYPE ddp_restarts_total counter"));
  EXPECT_THAT(out, HasSubstr("ddp_restarts_total 2\n"));
  EXPECT_THAT(out, HasSubstr("ddp_last_recovery_seconds 1.25\n"));
  EXPECT_THAT(out, HasSubstr("ddp_job_state{state=\"RECOVERING\"} 0"));
}

TEST(JobMetricsTest, StatesAndRanks) {
  struct Case {
    const char* name;
    JobState state;
    std::vector<RankStatus> ranks;
    std::vector<std::string> want;
    std::vector<std::string> absent;
  };
  const std::vector<Case> cases = {
      {"running",
       JobState::kRunning,
       {Rank(0, RankState::kTraining, 5), Rank(1, RankState::kTraining, 4)},
       {"ddp_job_state{state=\"RUNNING\"} 1", "ddp_job_state{state=\"FAILED\"} 0",
        "ddp_ranks{state=\"training\"} 2", "ddp_lost_ranks 0", "ddp_spare_nodes 0",
        "ddp_rank_step{rank=\"1\",host=\"h\"} 4"},
       {"ddp_ranks{state=\"lost\"}"}},
      {"a stopped job is STOPPED here",
       JobState::kStopped,
       {Rank(0, RankState::kStopped, 5)},
       {"ddp_job_state{state=\"STOPPED\"} 1", "ddp_job_state{state=\"STOPPING\"} 0",
        "ddp_job_finished 1", "ddp_ranks{state=\"stopped\"} 1"},
       {}},
      {"failed with a lost rank",
       JobState::kFailed,
       {Rank(0, RankState::kTraining, 5), Rank(1, RankState::kLost, 3),
        Rank(2, RankState::kFailed, 3)},
       {"ddp_job_state{state=\"FAILED\"} 1", "ddp_lost_ranks 1", "ddp_failed_ranks 1",
        "ddp_ranks{state=\"lost\"} 1"},
       {}},
      {"registering rows have no rank series",
       JobState::kRegistering,
       {Rank(-1, RankState::kRegistered, 0)},
       {"ddp_ranks{state=\"registered\"} 1"},
       {"ddp_rank_step{rank=\"-1\""}},
  };
  for (const Case& c : cases) {
    JobStatus s;
    s.job_id = "j";
    s.state = c.state;
    s.finished = IsTerminal(c.state);
    s.ranks = c.ranks;
    std::string out;
    RenderJobMetrics(s, &out);
    for (const std::string& w : c.want) EXPECT_THAT(out, HasSubstr(w)) << c.name;
    for (const std::string& a : c.absent) EXPECT_THAT(out, Not(HasSubstr(a))) << c.name;
    for (JobState st : kAllJobStates) {
      EXPECT_THAT(out, HasSubstr(absl::StrCat("ddp_job_state{state=\"", JobStateName(st), "\"}")))
          << c.name;
    }
  }
}

TEST(JobMetricsTest, AStalledRankAndThePhases) {
  JobStatus s;
  s.job_id = "j";
  s.state = JobState::kRunning;
  s.ranks = {Rank(0, RankState::kTraining, 5), Rank(1, RankState::kStalled, 5)};
  s.ranks[0].phase = StepPhase::kAllreduce;
  s.ranks[0].phase_seconds = 70;
  s.ranks[1].phase = StepPhase::kData;
  s.ranks[1].phase_seconds = 71.5;
  std::string out;
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("ddp_stalled_rank -1\n")) << "no stall report yet";
  EXPECT_THAT(out, HasSubstr("ddp_stall_seconds 0\n"));
  EXPECT_THAT(out, HasSubstr("ddp_rank_phase_seconds{rank=\"1\",phase=\"data\"} 71.5"));
  EXPECT_THAT(out, HasSubstr("ddp_rank_phase_seconds{rank=\"0\",phase=\"allreduce\"} 70"));
  s.stall = {1, StepPhase::kData, 71.5, 60, {{StepPhase::kAllreduce, 1}}};
  out.clear();
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("ddp_stalled_rank 1\n"));
  EXPECT_THAT(out, HasSubstr("ddp_stall_seconds 71.5\n"));
  EXPECT_THAT(out, HasSubstr("ddp_ranks{state=\"stalled\"} 1"));
}

}  // namespace
}  // namespace ddp
