#include "coordinator/job/recovery.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

FailureCause Killed(int rank) {
  return {rank, FailureKind::kSignal, "rank " + std::to_string(rank) + " killed by signal 9"};
}

TEST(RecoveryTest, TheBudgetIsJobWide) {
  struct Case {
    int max_restarts;
    int losses;
    int want_used;
    bool want_can_restart;
  };
  const std::vector<Case> cases = {
      {0, 1, 0, false}, {1, 1, 1, false}, {3, 1, 1, true}, {3, 3, 3, false}, {-2, 1, 0, false},
  };
  for (const Case& c : cases) {
    Recovery r(c.max_restarts, absl::Seconds(30), kStart);
    for (int i = 0; i < c.losses; ++i) {
      r.Lose(Killed(i), kStart + absl::Seconds(i));
      if (r.CanRestart()) r.UseRestart();
    }
    EXPECT_EQ(r.restarts(), c.want_used) << c.max_restarts << "/" << c.losses;
    EXPECT_EQ(r.CanRestart(), c.want_can_restart) << c.max_restarts << "/" << c.losses;
    EXPECT_EQ(static_cast<int>(r.lost().size()), c.losses);
  }
}

TEST(RecoveryTest, DurationDeadlineAndReplacedRanks) {
  Recovery r(3, absl::Seconds(30), kStart);
  EXPECT_DOUBLE_EQ(r.last_seconds(), -1);
  EXPECT_FALSE(r.in_progress());
  EXPECT_EQ(r.deadline(), absl::InfiniteFuture());
  r.Lose(Killed(2), kStart + absl::Seconds(10));
  r.UseRestart();
  r.Begin(Killed(2), kStart + absl::Seconds(10));
  EXPECT_TRUE(r.in_progress());
  EXPECT_EQ(r.deadline(), kStart + absl::Seconds(40));
  EXPECT_EQ(r.cause().rank, 2);
  // A second loss during the recovery: the deadline moves, the cause and start stay.
  r.Lose(Killed(1), kStart + absl::Seconds(15));
  r.UseRestart();
  r.Begin(Killed(1), kStart + absl::Seconds(15));
  EXPECT_EQ(r.deadline(), kStart + absl::Seconds(45));
  EXPECT_EQ(r.cause().rank, 2);
  EXPECT_DOUBLE_EQ(r.Elapsed(kStart + absl::Seconds(12)), 2);
  r.End(kStart + absl::Milliseconds(11500), {2});
  EXPECT_FALSE(r.in_progress());
  EXPECT_DOUBLE_EQ(r.last_seconds(), 1.5);
  ASSERT_EQ(r.lost().size(), 2u);
  EXPECT_TRUE(r.lost()[0].replaced);
  EXPECT_FALSE(r.lost()[1].replaced);
  EXPECT_DOUBLE_EQ(r.lost()[0].at_seconds, 10);
  EXPECT_EQ(r.restarts(), 2);
}

TEST(RecoveryTest, ExhaustedCauseNamesEveryLostRank) {
  Recovery off(0, absl::Seconds(30), kStart);
  off.Lose(Killed(3), kStart);
  EXPECT_EQ(off.ExhaustedCause(Killed(3)).text, "rank 3 killed by signal 9") << "fail fast as ever";

  Recovery r(2, absl::Seconds(30), kStart);
  for (int rank : {0, 1}) {
    r.Lose(Killed(rank), kStart + absl::Seconds(5 * (rank + 1)));
    r.UseRestart();
  }
  r.Lose(Killed(2), kStart + absl::Seconds(20));
  ASSERT_FALSE(r.CanRestart());
  const FailureCause c = r.ExhaustedCause(Killed(2));
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.kind, FailureKind::kSignal);
  EXPECT_EQ(c.text,
            "rank 2 killed by signal 9; restarts exhausted (2 of 2 used); lost before: rank 0 "
            "killed by signal 9 at +5.0s; rank 1 killed by signal 9 at +10.0s");
}

TEST(RecoveryTest, ALossTakesTheRestartOfAnUnexplainedFailure) {
  struct Case {
    const char* name;
    int max_restarts;
    bool unexplained_first;  // an early rejoin waited in vain and began the recovery
    bool want_take;
    int want_restarts;
  };
  const std::vector<Case> cases = {
      {"a plain loss uses a restart", 2, false, true, 1},
      {"the loss explains the failure: no second restart", 2, true, true, 1},
      {"the budget spent by the failure still covers its loss", 1, true, true, 1},
      {"no restart at all", 0, false, false, 0},
  };
  for (const Case& c : cases) {
    Recovery r(c.max_restarts, absl::Seconds(30), kStart);
    if (c.unexplained_first) {
      r.RejoinedEarly(kStart, "rank 0 (host h)", "allreduce: connection reset");
      const std::optional<FailureCause> cause =
          r.Unexplained(kStart + absl::Seconds(5), absl::Seconds(5));
      ASSERT_TRUE(cause.has_value()) << c.name;
      r.UseRestartForUnexplained();
      r.Begin(*cause, kStart + absl::Seconds(5));
      EXPECT_TRUE(r.unexplained_restart()) << c.name;
    }
    r.Lose(Killed(1), kStart + absl::Seconds(6));
    EXPECT_EQ(r.TakeRestart(), c.want_take) << c.name;
    EXPECT_EQ(r.restarts(), c.want_restarts) << c.name;
    EXPECT_FALSE(r.unexplained_restart()) << c.name << ": taken once";
  }
}

TEST(RecoveryTest, AnEarlyRejoinWaitsForItsWindow) {
  const absl::Duration window = absl::Seconds(5);
  struct Step {
    const char* name;
    enum { kRejoin, kAsk, kBegin, kEnd } what;
    double at;  // seconds after kStart
    bool want_cause;
  };
  const std::vector<Step> steps = {
      {"nothing kept", Step::kAsk, 0, false},
      {"rank 1 rejoins early", Step::kRejoin, 1, false},
      {"within the window", Step::kAsk, 5.5, false},
      {"a later rejoin keeps the first", Step::kRejoin, 3, false},
      {"the window ran out", Step::kAsk, 6, true},
      {"returned once", Step::kAsk, 7, false},
      {"another early rejoin", Step::kRejoin, 8, false},
      {"a recovery began (the loss came)", Step::kBegin, 9, false},
      {"nothing to explain any more", Step::kAsk, 20, false},
      {"a third", Step::kRejoin, 21, false},
      {"the recovery ended", Step::kEnd, 22, false},
      {"forgotten", Step::kAsk, 40, false},
  };
  Recovery r(3, absl::Seconds(30), kStart);
  for (const Step& s : steps) {
    const absl::Time now = kStart + absl::Seconds(s.at);
    switch (s.what) {
      case Step::kRejoin:
        r.RejoinedEarly(now, "rank 1 (host h)", "allreduce: connection reset");
        break;
      case Step::kBegin:
        r.Begin(Killed(2), now);
        break;
      case Step::kEnd:
        r.End(now, {2});
        break;
      case Step::kAsk: {
        const std::optional<FailureCause> cause = r.Unexplained(now, window);
        EXPECT_EQ(cause.has_value(), s.want_cause) << s.name;
        if (cause) {
          EXPECT_EQ(cause->kind, FailureKind::kCollectiveError);
          EXPECT_EQ(cause->text,
                    "a collective failed on rank 1 (host h) with no rank lost: allreduce: "
                    "connection reset");
        }
        break;
      }
    }
  }
}

TEST(RecoveryTest, NodesKnownAliveAndTheLossOfARank) {
  Recovery r(3, absl::Seconds(30), kStart);
  r.node_tasks().Asked(/*node=*/2, kStart);
  r.NodeReported(1);
  struct Case {
    int node;
    double at;
    bool want;
  };
  const std::vector<Case> cases = {
      {1, 100, true},  // reported a lost worker: alive until the recovery ends
      {2, 1, true},    // asked what to fence just now
      {2, 100, false},
      {3, 0, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(r.NodeAlive(c.node, kStart + absl::Seconds(c.at)), c.want) << c.node << "@" << c.at;
  }
  r.Lose(Killed(4), kStart);
  r.Lose({4, FailureKind::kLostHeartbeat, "rank 4 silent for 10s"}, kStart + absl::Seconds(1));
  EXPECT_EQ(r.LossOf(4), "rank 4 silent for 10s") << "the latest loss";
  EXPECT_EQ(r.LossOf(5), "lost");
  r.Begin(Killed(4), kStart);
  r.End(kStart + absl::Seconds(2), {4});
  EXPECT_FALSE(r.NodeAlive(1, kStart + absl::Seconds(2))) << "reports are the recovery's";
}

}  // namespace
}  // namespace ddp
