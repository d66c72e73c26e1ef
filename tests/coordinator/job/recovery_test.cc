#include "coordinator/job/recovery.h"

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

}  // namespace
}  // namespace ddp
