#include "common/job_status.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

TEST(JobStatusTest, JobStateNames) {
  struct Case {
    JobState state;
    const char* name;
    const char* json;
    bool terminal;
  };
  const std::vector<Case> cases = {
      {JobState::kRegistering, "REGISTERING", "REGISTERING", false},
      {JobState::kRunning, "RUNNING", "RUNNING", false},
      {JobState::kRecovering, "RECOVERING", "RECOVERING", false},
      {JobState::kStopping, "STOPPING", "STOPPING", false},
      // The contract's word for a finished graceful stop stays STOPPING (with finished: true).
      {JobState::kStopped, "STOPPED", "STOPPING", true},
      {JobState::kSucceeded, "SUCCEEDED", "SUCCEEDED", true},
      {JobState::kFailed, "FAILED", "FAILED", true},
  };
  ASSERT_EQ(cases.size(), std::size(kAllJobStates));
  for (const Case& c : cases) {
    EXPECT_STREQ(JobStateName(c.state), c.name);
    EXPECT_STREQ(JobStateJsonName(c.state), c.json);
    EXPECT_EQ(IsTerminal(c.state), c.terminal) << c.name;
  }
}

TEST(JobStatusTest, RankStateAndPhaseNames) {
  struct RankCase {
    RankState state;
    const char* name;
    bool final;
  };
  const std::vector<RankCase> ranks = {
      {RankState::kRegistered, "registered", false},
      {RankState::kStarting, "starting", false},
      {RankState::kTraining, "training", false},
      {RankState::kEvaluating, "evaluating", false},
      {RankState::kCheckpointing, "checkpointing", false},
      {RankState::kFinished, "finished", false},
      {RankState::kDone, "done", true},
      {RankState::kStopped, "stopped", true},
      {RankState::kFailed, "failed", true},
      {RankState::kLost, "lost", true},
      {RankState::kStalled, "stalled", false},
  };
  ASSERT_EQ(ranks.size(), std::size(kAllRankStates));
  for (const RankCase& c : ranks) {
    EXPECT_STREQ(RankStateName(c.state), c.name);
    EXPECT_EQ(IsFinal(c.state), c.final) << c.name;
  }
  const std::vector<std::pair<StepPhase, std::string>> phases = {
      {StepPhase::kNone, "none"},
      {StepPhase::kData, "data"},
      {StepPhase::kForward, "forward"},
      {StepPhase::kBackward, "backward"},
      {StepPhase::kAllreduce, "allreduce"},
      {StepPhase::kOptimizer, "optimizer"},
      {StepPhase::kCheckpoint, "checkpoint"},
      {StepPhase::kEval, "eval"},
      {StepPhase::kRecovery, "recovery"},
  };
  ASSERT_EQ(phases.size(), std::size(kAllStepPhases));
  for (const auto& [phase, name] : phases) EXPECT_EQ(StepPhaseName(phase), name);
}

// JSON numbers are the value rounded to six significant digits (printf's %.6g), written as the
// shortest text that reads back as that value, integral ones without a fraction; NaN and
// infinities are null.
TEST(JobStatusTest, JsonNumbersAreSixSignificantDigits) {
  struct Case {
    double v;
    const char* json;
  };
  const std::vector<Case> cases = {
      {0.0, "0"},
      {1.0, "1"},
      {100.0, "100"},
      {0.25, "0.25"},
      {0.1 + 0.2, "0.3"},
      {1e-7, "1e-07"},
      {123456.5, "123456"},
      {1234567.0, "1234570"},
      {1e21, "1e+21"},
      {-3.75e-5, "-3.75e-05"},
      {3.14159265, "3.14159"},
  };
  for (const Case& c : cases) {
    std::string got;
    AppendJsonNumber(c.v, &got);
    EXPECT_EQ(got, c.json) << c.v;
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(-10, 10)(rng);
    const double v = std::ldexp(mantissa, std::uniform_int_distribution<int>(-60, 60)(rng));
    char six[64];
    std::snprintf(six, sizeof(six), "%.6g", v);
    std::string got;
    AppendJsonNumber(v, &got);
    ASSERT_EQ(std::strtod(got.c_str(), nullptr), std::strtod(six, nullptr)) << v << " " << got;
  }
  for (double v : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    std::string got;
    AppendJsonNumber(v, &got);
    EXPECT_EQ(got, "null");
  }
}

TEST(JobStatusTest, JsonQuoteEscapes) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("x\ny\tz\r"), "\"x\\ny\\tz\\r\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote("h\xc3\xa9"), "\"h\xc3\xa9\"");
}

TEST(JobStatusTest, ToJsonHasTheContractFields) {
  JobStatus s;
  s.job_id = "job\"1";
  s.state = JobState::kRunning;
  s.world_size = 2;
  s.registered = 2;
  s.epoch = 1;
  s.epochs = 3;
  s.step = 10;
  s.steps_per_epoch = 5;
  s.loss = 0.5;
  s.samples_per_second = 100;
  RankStatus r;
  r.rank = 1;
  r.host = "node\n1";
  r.local_rank = 1;
  r.state = RankState::kTraining;
  r.step = 10;
  r.last_seen_seconds = 0.25;
  s.ranks.push_back(r);
  std::string json = ToJson(s);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  for (const char* want : {"\"job_id\":\"job\\\"1\"",
                           "\"state\":\"RUNNING\"",
                           "\"world_size\":2",
                           "\"registered\":2",
                           "\"epoch\":1",
                           "\"epochs\":3",
                           "\"step\":10",
                           "\"steps_per_epoch\":5",
                           "\"loss\":0.5",
                           "\"samples_per_second\":100",
                           "\"ranks\":[{\"rank\":1,\"host\":\"node\\n1\"",
                           "\"local_rank\":1",
                           "\"state\":\"training\"",
                           "\"last_seen_seconds\":0.25",
                           "\"failed_rank\":null",
                           "\"eta_seconds\":null",
                           "\"checkpoint\":null",
                           "\"failure_reason\":\"\"",
                           "\"failure\":null",
                           "\"phase\":null",
                           "\"phase_seconds\":0"}) {
    EXPECT_THAT(json, HasSubstr(want));
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(JobStatusTest, RecoveryFieldsExtendTheContract) {
  JobStatus s;
  s.state = JobState::kRecovering;
  std::string json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"state\":\"RECOVERING\""));
  EXPECT_THAT(json, HasSubstr("\"restarts\":0"));
  EXPECT_THAT(json, HasSubstr("\"last_recovery_seconds\":null"));
  s.restarts = 2;
  s.max_restarts = 3;
  s.last_recovery_seconds = 1.5;
  s.lost_ranks.push_back({{2, FailureKind::kSignal, "rank 2 killed by signal 9"}, 4.0, true});
  json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"restarts\":2"));
  EXPECT_THAT(json, HasSubstr("\"last_recovery_seconds\":1.5"));
  EXPECT_THAT(json, HasSubstr("\"lost_ranks\":[{\"rank\":2,\"cause\":\"signal\",\"text\":"
                              "\"rank 2 killed by signal 9\""));
  EXPECT_THAT(json, HasSubstr("\"replaced\":true"));
  EXPECT_THAT(json, HasSubstr("\"spare_nodes\":0"));
  s.spare_nodes = 2;
  EXPECT_THAT(ToJson(s), HasSubstr("\"spare_nodes\":2"));
}

TEST(JobStatusTest, FailedJobNamesTheRankAndTheTypedCause) {
  JobStatus s;
  s.state = JobState::kFailed;
  s.finished = true;
  s.failure = {3, FailureKind::kLostHeartbeat, "rank 3 lost"};
  s.loss = std::nan("");
  std::string json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"state\":\"FAILED\""));
  EXPECT_THAT(json, HasSubstr("\"failed_rank\":3"));
  EXPECT_THAT(json, HasSubstr("\"failure_reason\":\"rank 3 lost\""));
  EXPECT_THAT(
      json,
      HasSubstr("\"failure\":{\"rank\":3,\"cause\":\"lost_heartbeat\",\"text\":\"rank 3 lost\"}"));
  EXPECT_THAT(json, HasSubstr("\"loss\":null"));
  // No single rank to blame.
  s.failure = {-1, FailureKind::kRegistrationTimeout, "registration timed out"};
  json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"failed_rank\":null"));
  EXPECT_THAT(json, HasSubstr("\"failure\":{\"rank\":null,\"cause\":\"registration_timeout\""));
}

TEST(JobStatusTest, StoppedJobKeepsTheContractWordAndSaysWhy) {
  JobStatus s;
  s.state = JobState::kStopped;
  s.finished = true;
  s.stop_reason = "ddpctl stop";
  RankStatus r;
  r.state = RankState::kStopped;
  r.phase = StepPhase::kCheckpoint;
  r.phase_seconds = 1.5;
  s.ranks.push_back(r);
  std::string json = ToJson(s);
  EXPECT_THAT(json, HasSubstr("\"state\":\"STOPPING\",\"finished\":true"));
  EXPECT_THAT(json, HasSubstr("\"stop_reason\":\"ddpctl stop\""));
  EXPECT_THAT(json, HasSubstr("\"failure\":null"));
  EXPECT_THAT(json, HasSubstr("\"state\":\"stopped\""));
  EXPECT_THAT(json, HasSubstr("\"phase\":\"checkpoint\",\"phase_seconds\":1.5"));
}

// Fuzz finding (fuzz/regressions/status_json/invalid-utf8): bytes that are not UTF-8 passed
// through JsonQuote, so one bad byte in a host name made /api/status invalid JSON.
TEST(JobStatusTest, JsonQuoteReplacesInvalidUtf8) {
  EXPECT_EQ(JsonQuote("a\xff"
                      "b"),
            "\"a\xef\xbf\xbd"
            "b\"");
  EXPECT_EQ(JsonQuote("\xc3"), "\"\xef\xbf\xbd\"");  // a truncated sequence
  JobStatus s;
  s.job_id = "j\xc0\xaf";           // overlong '/'
  s.failure.text = "\xed\xa0\x80";  // a surrogate
  s.events = {"\x80"};
  RankStatus r;
  r.host = "n\xf4\x90\x80\x80";  // above U+10FFFF
  s.ranks.push_back(r);
  EXPECT_TRUE(IsValidUtf8(ToJson(s))) << ToJson(s);
}

// Fuzz finding (fuzz/regressions/status_text/behind-by-overflow): the gap between a huge median
// step and a rank's negative step overflowed (undefined behaviour; in practice the rank was
// shown as not lagging at all).
TEST(JobStatusTest, JudgeRankSaturatesInsteadOfOverflowing) {
  RankStatus r;
  r.state = RankState::kTraining;
  r.step = INT64_MIN + 5;
  EXPECT_EQ(JudgeRank(r, INT64_MAX - 3).behind_by, INT64_MAX);
  r.step = INT64_MAX;
  EXPECT_EQ(JudgeRank(r, INT64_MIN).behind_by, 0);
  r.step = 10;
  EXPECT_EQ(JudgeRank(r, 20).behind_by, 10);
}

TEST(JobStatusTest, RankFlagNames) {
  const std::vector<std::pair<RankFlag, std::string>> flags = {
      {RankFlag::kNone, "none"},           {RankFlag::kFailed, "failed"},
      {RankFlag::kLost, "lost"},           {RankFlag::kStalled, "stalled"},
      {RankFlag::kSilent, "silent"},       {RankFlag::kBehind, "behind"},
      {RankFlag::kStraggler, "straggler"},
  };
  ASSERT_EQ(flags.size(), std::size(kAllRankFlags));
  for (const auto& [flag, name] : flags) EXPECT_EQ(RankFlagName(flag), name);
  EXPECT_STREQ(RankFlagName(static_cast<RankFlag>(99)), "unknown");
}

// A straggler is flagged as one before it is behind; a silent or stalled rank stays so.
TEST(JobStatusTest, AStragglerIsFlaggedBeforeBehind) {
  RankStatus r;
  r.rank = 2;
  r.state = RankState::kTraining;
  r.step = 10;
  r.score.measured = true;
  r.score.straggler = true;
  EXPECT_EQ(JudgeRank(r, 20).flag, RankFlag::kStraggler);
  EXPECT_EQ(JudgeRank(r, 20).behind_by, 10);
  r.last_seen_seconds = 5;
  EXPECT_EQ(JudgeRank(r, 20).flag, RankFlag::kSilent);
  r.state = RankState::kDone;
  EXPECT_EQ(JudgeRank(r, 20).flag, RankFlag::kNone);
}

// The screens' rules, decided once: every rank state with and without silence and a gap.
TEST(JobStatusTest, JudgeRankFlagsEveryState) {
  struct Case {
    RankState state;
    int64_t step;      // the median is 100
    double last_seen;  // over 2 s is silent
    RankFlag flag;
    int64_t behind_by;
    bool final;
  };
  const std::vector<Case> cases = {
      {RankState::kTraining, 100, 0.5, RankFlag::kNone, 0, false},
      {RankState::kTraining, 98, 0.5, RankFlag::kNone, 0, false},  // within max(2, 1%)
      {RankState::kTraining, 90, 0.5, RankFlag::kBehind, 10, false},
      {RankState::kTraining, 100, 2.5, RankFlag::kSilent, 0, false},
      {RankState::kEvaluating, 90, 2.5, RankFlag::kSilent, 10, false},  // silent wins, gap kept
      {RankState::kStalled, 90, 0.5, RankFlag::kStalled, 10, false},
      {RankState::kStalled, 100, 9.0, RankFlag::kStalled, 0, false},
      {RankState::kFailed, 0, 9.0, RankFlag::kFailed, 0, true},
      {RankState::kLost, 0, 9.0, RankFlag::kLost, 0, true},
      {RankState::kDone, 0, 9.0, RankFlag::kNone, 0, true},
      {RankState::kStopped, 0, 9.0, RankFlag::kNone, 0, true},
      {RankState::kFinished, 100, 0.5, RankFlag::kNone, 0, false},
  };
  for (const Case& c : cases) {
    RankStatus r;
    r.rank = 0;
    r.state = c.state;
    r.step = c.step;
    r.last_seen_seconds = c.last_seen;
    const RankVerdict v = JudgeRank(r, 100);
    EXPECT_EQ(v.flag, c.flag) << RankStateName(c.state) << " " << c.step;
    EXPECT_EQ(v.behind_by, c.behind_by) << RankStateName(c.state) << " " << c.step;
    EXPECT_EQ(v.final, c.final) << RankStateName(c.state);
  }
  // A worker registered before the world was complete has no rank: never flagged.
  RankStatus waiting;
  waiting.rank = -1;
  waiting.state = RankState::kRegistered;
  waiting.last_seen_seconds = 30;
  EXPECT_EQ(JudgeRank(waiting, 100).flag, RankFlag::kNone);
}

TEST(JobStatusTest, ExitCodeIsDecidedForEveryJobState) {
  const std::vector<std::pair<JobState, const char*>> cases = {
      {JobState::kRegistering, "null"}, {JobState::kRunning, "null"},
      {JobState::kRecovering, "null"},  {JobState::kStopping, "null"},
      {JobState::kStopped, "3"},        {JobState::kSucceeded, "0"},
      {JobState::kFailed, "1"},
  };
  ASSERT_EQ(cases.size(), std::size(kAllJobStates));
  for (const auto& [state, code] : cases) {
    JobStatus s;
    s.state = state;
    s.finished = IsTerminal(state);
    EXPECT_THAT(ToJson(s), HasSubstr(absl::StrCat("\"exit_code\":", code))) << JobStateName(state);
    DecideStatus(&s);
    EXPECT_EQ(s.exit_code, IsTerminal(state) ? JobExitCode(state) : -1);
  }
  EXPECT_EQ(JobExitCode(JobState::kSucceeded), kExitOk);
  EXPECT_EQ(JobExitCode(JobState::kStopped), kExitResumable);
  EXPECT_EQ(JobExitCode(JobState::kFailed), kExitFailed);
}

TEST(JobStatusTest, RanksCarryTheirFlagAndWhetherTheyAreFinal) {
  JobStatus s;
  s.state = JobState::kRunning;
  for (int i = 0; i < 4; ++i) {
    RankStatus r;
    r.rank = i;
    r.state = RankState::kTraining;
    r.step = 100;
    s.ranks.push_back(r);
  }
  s.ranks[1].step = 50;
  s.ranks[2].state = RankState::kLost;
  s.ranks[3].last_seen_seconds = 3;
  const std::string json = ToJson(s);
  EXPECT_THAT(
      json,
      HasSubstr(
          "\"phase_seconds\":0,\"flag\":null,\"behind_by\":0,\"final\":false,\"score\":null}"));
  EXPECT_THAT(json,
              HasSubstr("\"flag\":\"behind\",\"behind_by\":50,\"final\":false,\"score\":null}"));
  EXPECT_THAT(json, HasSubstr("\"flag\":\"lost\",\"behind_by\":0,\"final\":true,\"score\":null}"));
  EXPECT_THAT(json,
              HasSubstr("\"flag\":\"silent\",\"behind_by\":0,\"final\":false,\"score\":null}"));
  EXPECT_THAT(json, HasSubstr("\"exit_code\":null"));
}

}  // namespace
}  // namespace ddp
