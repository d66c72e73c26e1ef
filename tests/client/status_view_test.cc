// ddpctl's text views (client/ddpctl/status_view.h): the layout of a running and a failed job,
// and the fuzz findings (fuzz/regressions/status_text/): bytes from a job id, host name or stop
// reason reach the operator's terminal only as printable UTF-8, and extreme step counts neither
// overflow nor print nonsense totals.
#include "client/ddpctl/status_view.h"

#include <cstdint>
#include <string>

#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

JobStatus Running() {
  JobStatus s;
  s.job_id = "4242";
  s.state = JobState::kRunning;
  s.world_size = 2;
  s.registered = 2;
  s.num_nodes = 1;
  s.epoch = 0;
  s.epochs = 3;
  s.step = 92;
  s.steps_per_epoch = 600;
  s.loss = 1.495;
  s.samples_per_second = 16390;
  s.eta_seconds = 144;
  s.uptime_seconds = 26;
  for (int r = 0; r < 2; ++r) {
    RankStatus rank;
    rank.rank = r;
    rank.host = "node0";
    rank.local_rank = r;
    rank.state = RankState::kTraining;
    rank.step = 92;
    s.ranks.push_back(rank);
  }
  return s;
}

bool HasControls(const std::string& text, bool allow_newline) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && !(allow_newline && c == '\n')) || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() &&
        (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80) {
      return true;  // U+0080..U+009F
    }
  }
  return false;
}

TEST(StatusViewTest, RunningJob) {
  const std::string view = FormatStatus(Running(), {});
  EXPECT_THAT(view, HasSubstr("job 4242  generation 0  RUNNING  up 26s"));
  EXPECT_THAT(view, HasSubstr("step 92/1800"));
  EXPECT_THAT(view, HasSubstr("workers 2/2 registered on 1 node(s)\n"));
  JobStatus with_spare = Running();
  with_spare.spare_nodes = 1;
  EXPECT_THAT(FormatStatus(with_spare, {}),
              HasSubstr("workers 2/2 registered on 1 node(s), 1 spare(s)\n"));
  EXPECT_EQ(FormatLine(Running()),
            "RUNNING epoch 0/3 step 92/1800 loss 1.495 16390.0 samples/s ranks 2/2 working");
}

// A straggler is said first with its cause; the step breakdown and ETTR get one line each.
TEST(StatusViewTest, AStragglerTheBreakdownAndEttrAreShown) {
  JobStatus s = Running();
  s.ranks[1].score.measured = true;
  s.ranks[1].score.relative = 0.52;
  s.ranks[1].score.straggler = true;
  s.ranks[1].host = "n1";
  s.stragglers = {{1, "n1", 1, StepSection::kCompute, 0.52, 1.9, 10, 42}};
  s.breakdown.rank = 1;
  s.breakdown.seconds[static_cast<int>(StepSection::kCompute)] = 0.17;
  s.breakdown.seconds[static_cast<int>(StepSection::kData)] = 0.01;
  s.breakdown.spread[static_cast<int>(StepSection::kCommunication)] = 0.09;
  s.time_use = {300, 279, 12, 0, 0, 6, 3, 0};
  DecideStatus(&s);
  const std::string text = FormatStatus(s, ViewOptions());
  EXPECT_THAT(text, StartsWith("STRAGGLER: rank 1 (host n1): compute 1.9x slower than the best "
                               "rank for 42 s (relative score 0.52)\n"));
  EXPECT_THAT(text, HasSubstr("step 0.180s (slowest rank 1): data 0.010s, compute 0.170s, "
                              "communication 0.000s, optimizer 0.000s; spread across ranks: data "
                              "0.000s, compute 0.000s, communication 0.090s, optimizer 0.000s\n"));
  EXPECT_THAT(text, HasSubstr("ETTR 93.0% of 5m00s: training 4m39s, startup 12s, recoveries 0s, "
                              "stalls 0s, checkpoints 6s, evaluation 3s, other 0s\n"));
  EXPECT_THAT(text, HasSubstr("straggler (score 0.52)"));
  EXPECT_THAT(FormatLine(s), HasSubstr(" straggler: rank 1 (host n1): compute 1.9x slower"));
  EXPECT_THAT(FormatLine(s), HasSubstr(" ETTR 93.0%"));
}

TEST(StatusViewTest, AJournalThatFailedOrIsStuckIsSaidFirst) {
  JobStatus s = Running();
  s.journal = {JournalCondition::kOk, "", 40, 0, 0, 0.0};
  EXPECT_THAT(FormatStatus(s, {}), Not(HasSubstr("JOURNAL")));
  s.journal = {JournalCondition::kFailed, "fdatasync: Input/output error\n", 40, 0, 5, 0.0};
  const std::string failed = FormatStatus(s, {});
  EXPECT_THAT(failed, StartsWith("JOURNAL FAILED: fdatasync: Input/output error"));
  const std::string first_line = failed.substr(0, failed.find('\n'));
  EXPECT_THAT(first_line, HasSubstr("5 record(s) dropped"));  // the error's newline escaped
  EXPECT_FALSE(HasControls(first_line, false));
  s.journal = {JournalCondition::kStuck, "", 40, 7, 0, 75.0};
  EXPECT_THAT(
      FormatStatus(s, {}),
      StartsWith("JOURNAL STUCK: a write has not returned for 1m15s (7 record(s) waiting)\n"));
}

// One line names the coordinator (epoch, host, node, takeovers) and its standby, always.
TEST(StatusViewTest, TheCoordinatorAndItsStandbyAreOneLine) {
  JobStatus s = Running();
  s.coordinator = {0, 0, "n0", 1, "n1", 0};
  EXPECT_THAT(FormatStatus(s, {}),
              HasSubstr("\ncoordinator: epoch 0 on host n0 (node 0); standby: node 1 (host n1), "
                        "0 records behind\n"));
  s.coordinator = {1, 1, "n1", 2, "n2", 1};
  EXPECT_THAT(FormatStatus(s, {}),
              HasSubstr("\ncoordinator: epoch 1 on host n1 (node 1), 1 takeover; standby: node 2 "
                        "(host n2), 1 record behind\n"));
  s.coordinator = {3, 2, "n2", -1, "", 0};
  EXPECT_THAT(
      FormatStatus(s, {}),
      HasSubstr("\ncoordinator: epoch 3 on host n2 (node 2), 3 takeovers; standby: none\n"));
  s.coordinator = {};
  EXPECT_THAT(FormatStatus(s, {}),
              HasSubstr("\ncoordinator: epoch 0 on host ? (node 0); standby: none\n"));
}

TEST(StatusViewTest, HostileStringsArePrintedAsPlainText) {
  JobStatus s = Running();
  s.state = JobState::kFailed;
  s.failure.rank = 1;
  s.failure.kind = FailureKind::kWorkerError;
  s.job_id = "job\x1b]0;owned\x07";  // a terminal title escape
  s.failure.text =
      "line one\nline two\x1b[2J\xff\xfe \xc2\x9b"
      "31m";  // newline, clear, bad bytes, CSI
  s.ranks[1].host = "evil\x1b[31mhost";
  s.ranks[1].state = RankState::kFailed;
  s.events = {"+1.0s \x1b[1Aoverwrite"};
  s.coordinator = {0, 0, "co\nord\x1b[2J", 1, "stand\x1b]0;by", 0};
  const std::string view = FormatStatus(s, {});
  EXPECT_TRUE(IsValidUtf8(view)) << view;
  EXPECT_FALSE(HasControls(view, /*allow_newline=*/true)) << view;
  EXPECT_THAT(view, HasSubstr("job job?]0;owned?"));
  EXPECT_THAT(view, HasSubstr("reason: line one line two?[2J\xef\xbf\xbd\xef\xbf\xbd ?31m"));
  EXPECT_THAT(view, HasSubstr("evil?[31mhost"));
  EXPECT_THAT(view, HasSubstr("+1.0s ?[1Aoverwrite"));
  EXPECT_THAT(view, HasSubstr("on host co ord?[2J (node 0); standby: node 1 (host stand?]0;by)"));
  const std::string line = FormatLine(s);
  EXPECT_TRUE(IsValidUtf8(line)) << line;
  EXPECT_FALSE(HasControls(line, /*allow_newline=*/false)) << line;
  EXPECT_THAT(line, Not(HasSubstr("\n")));
}

// The view shows the decided fields as the status carries them (common/job_status.h): a rank's
// flag, behind_by and final and the job's exit code, even where the rules would say otherwise.
TEST(StatusViewTest, ShowsTheDecidedFieldsAsSent) {
  JobStatus s = Running();
  s.state = JobState::kFailed;
  s.finished = true;
  s.exit_code = 7;  // no rule gives a FAILED job 7: the view shows it all the same
  s.ranks[0].state = RankState::kTraining;
  s.ranks[0].flag = RankFlag::kLost;  // the rules would flag nothing
  s.ranks[0].final = true;
  s.ranks[1].state = RankState::kFailed;
  s.ranks[1].flag = RankFlag::kNone;  // the rules would flag it failed
  s.ranks[1].behind_by = 12;
  const std::string view = FormatStatus(s, {});
  EXPECT_THAT(view, HasSubstr("FAILED (finished, exit 7)"));
  EXPECT_THAT(view, HasSubstr("; 1 flagged; 1 final\n"));
  EXPECT_THAT(view, HasSubstr("training       << lost\n"));
  EXPECT_THAT(view, HasSubstr("failed         << behind by 12\n"));
  EXPECT_LT(view.find("training"), view.find("failed  "));  // flagged first
  EXPECT_THAT(FormatLine(s), HasSubstr("ranks 1/2 working 1 flagged"));
}

TEST(StatusViewTest, ExtremeStepCountsNeitherOverflowNorShowATotal) {
  JobStatus s = Running();
  s.epochs = (int64_t{1} << 33) + 1;
  s.steps_per_epoch = int64_t{1} << 31;  // the product is 2^64 + 2^31: it used to wrap to 2^31
  EXPECT_THAT(FormatLine(s), HasSubstr(" step 92 loss"));
  s.epochs = -3;
  EXPECT_THAT(FormatStatus(s, {}), HasSubstr("step 92\n"));
  s.epochs = 3;
  s.ranks[0].step = INT64_MIN + 1;  // far behind a huge median: saturates
  s.ranks[1].step = INT64_MAX;
  const std::string view = FormatStatus(s, {});
  EXPECT_TRUE(IsValidUtf8(view));
}

}  // namespace
}  // namespace ddp
