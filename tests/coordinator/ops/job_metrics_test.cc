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

TEST(JobMetricsTest, CoordinatorEpochTakeoversAndStandby) {
  JobStatus s;
  s.coordinator = {2, 1, "n1", 0, "n0", 7};
  std::string out;
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("# TYPE ddp_coordinator_epoch gauge\nddp_coordinator_epoch 2\n"));
  EXPECT_THAT(out, HasSubstr("# HELP ddp_coordinator_takeovers_total "));
  EXPECT_THAT(out, HasSubstr("# TYPE ddp_coordinator_takeovers_total counter\n"
                             "ddp_coordinator_takeovers_total 2\n"));
  EXPECT_THAT(out, HasSubstr("# TYPE ddp_standby_behind_records gauge\n"
                             "ddp_standby_behind_records 7\n"));
  // No standby: no standby gauge; epoch 0 is no takeover.
  s.coordinator = {};
  out.clear();
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("ddp_coordinator_epoch 0\n"));
  EXPECT_THAT(out, HasSubstr("ddp_coordinator_takeovers_total 0\n"));
  EXPECT_THAT(out, Not(HasSubstr("ddp_standby_behind_records")));
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

// Straggler detection and where the time goes: every rank's score by section (and "step" for
// the relative score), the straggler count, the step breakdown by section, ETTR and the time use
// by kind, with the status's words.
TEST(JobMetricsTest, StragglersBreakdownAndTimeUse) {
  JobStatus s;
  s.state = JobState::kRunning;
  RankStatus fast = Rank(0, RankState::kTraining, 10);
  fast.score.measured = true;
  RankStatus slow = Rank(5, RankState::kTraining, 10);
  slow.score.measured = true;
  slow.score.relative = 0.5;
  slow.score.individual = 0.9;
  slow.score.sections[static_cast<int>(StepSection::kCompute)] = 0.25;
  slow.score.straggler = true;
  RankStatus unscored = Rank(6, RankState::kTraining, 10);
  s.ranks = {fast, slow, unscored};
  StragglerReport st;
  st.rank = 5;
  s.stragglers = {st};
  s.breakdown.rank = 5;
  s.breakdown.seconds[static_cast<int>(StepSection::kData)] = 0.01;
  s.breakdown.seconds[static_cast<int>(StepSection::kCompute)] = 0.2;
  s.breakdown.spread[static_cast<int>(StepSection::kCompute)] = 0.1;
  s.time_use.wall = 100;
  s.time_use.training = 80;
  s.time_use.startup = 15;
  s.time_use.stall = 5;
  std::string out;
  RenderJobMetrics(s, &out);
  for (const std::string want : {
           "ddp_rank_score{rank=\"5\",section=\"step\"} 0.5\n",
           "ddp_rank_score{rank=\"5\",section=\"compute\"} 0.25\n",
           "ddp_rank_score{rank=\"5\",section=\"data\"} 1\n",
           "ddp_rank_score{rank=\"0\",section=\"communication\"} 1\n",
           "ddp_rank_score{rank=\"0\",section=\"optimizer\"} 1\n",
           "ddp_rank_individual_score{rank=\"5\"} 0.9\n",
           "ddp_rank_straggler{rank=\"5\"} 1\n",
           "ddp_rank_straggler{rank=\"0\"} 0\n",
           "ddp_stragglers 1\n",
           "ddp_step_section_seconds{section=\"compute\"} 0.2\n",
           "ddp_step_section_seconds{section=\"data\"} 0.01\n",
           "ddp_step_section_seconds{section=\"optimizer\"} 0\n",
           "ddp_step_section_spread_seconds{section=\"compute\"} 0.1\n",
           "ddp_ettr 0.8\n",
           "# TYPE ddp_time_seconds counter\n",
           "ddp_time_seconds{use=\"training\"} 80\n",
           "ddp_time_seconds{use=\"startup\"} 15\n",
           "ddp_time_seconds{use=\"stalls\"} 5\n",
           "ddp_time_seconds{use=\"recoveries\"} 0\n",
       }) {
    EXPECT_THAT(out, HasSubstr(want));
  }
  // An unscored rank has no score lines; each family has one header.
  EXPECT_THAT(out, Not(HasSubstr("ddp_rank_score{rank=\"6\"")));
  EXPECT_THAT(out, Not(HasSubstr("ddp_rank_straggler{rank=\"6\"")));
  const auto count = [&out](const std::string& what) {
    size_t n = 0;
    for (size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("# TYPE ddp_rank_score "), 1u);
  EXPECT_EQ(count("ddp_rank_score{"), 10u);
  EXPECT_EQ(count("ddp_time_seconds{use="), 7u);
}

// Before anything is measured: no breakdown families, ETTR -1, no stragglers.
TEST(JobMetricsTest, NothingMeasuredYet) {
  JobStatus s;
  s.state = JobState::kRegistering;
  std::string out;
  RenderJobMetrics(s, &out);
  EXPECT_THAT(out, HasSubstr("ddp_ettr -1\n"));
  EXPECT_THAT(out, HasSubstr("ddp_stragglers 0\n"));
  EXPECT_THAT(out, Not(HasSubstr("ddp_step_section_seconds")));
  EXPECT_THAT(out, Not(HasSubstr("ddp_rank_score{")));
}

}  // namespace
}  // namespace ddp
