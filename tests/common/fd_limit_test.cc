#include "common/fd_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

namespace ddp {
namespace {

TEST(FdLimitTest, ASoftLimitBelowTheHardOneIsRaisedToIt) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max < 128) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is " << lim.rlim_max;
  // Lowering the soft limit needs no privilege: start this process as Slurm often starts a task.
  rlimit low = lim;
  low.rlim_cur = 100;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);

  auto raised = RaiseFdLimitToHard();
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->before, 100u);
  EXPECT_EQ(raised->soft, lim.rlim_max);
  EXPECT_EQ(raised->hard, lim.rlim_max);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, lim.rlim_max);

  // At the hard limit already: nothing changes.
  auto again = RaiseFdLimitToHard();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->before, again->soft);
}

TEST(FdLimitTest, TheLogLineSaysWhatChangedOrWhatFallsShort) {
  // 16,384 rank connections, 2,048 node tasks', an eighth more (2,304), 64.
  EXPECT_EQ(CoordinatorFdsWanted(16384), 20800u);
  EXPECT_EQ(CoordinatorFdsWanted(0), 64u);
  EXPECT_EQ(WithConnectStormMargin(18432), 20736u);

  // Enough, unchanged: nothing to say.
  EXPECT_EQ(DescribeFdLimit({4096, 4096, 4096}, 1088), "");
  // Raised, and enough.
  EXPECT_EQ(DescribeFdLimit({1024, 524288, 524288}, 20800),
            "file descriptors: soft limit raised from 1024 to 524288 (RLIMIT_NOFILE's hard limit)");
  // Short even at the hard limit: a warning with both numbers and what to do.
  const std::string short_line = DescribeFdLimit({1024, 4096, 4096}, CoordinatorFdsWanted(16384));
  EXPECT_EQ(short_line.rfind("warning: file descriptors: this process may hold 4096 at most", 0),
            0u)
      << short_line;
  EXPECT_NE(short_line.find("needs about 20800"), std::string::npos) << short_line;
  EXPECT_NE(short_line.find("Raise the hard limit"), std::string::npos) << short_line;
  EXPECT_EQ(short_line.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace ddp
