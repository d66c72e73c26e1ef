// The test hold hook: what DDP_TEST_HOLD accepts, and that it stops the process once (a child
// process stops itself; the parent sees it stopped, continues it; a second worker reaching the
// same point goes on because of the marker).
#include "trainer/worker/test_hold.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(TestHold, StepPhasesHaveHoldPoints) {
  EXPECT_EQ(TestHold::PointOfPhase(StepPhase::kData), TestHold::Point::kData);
  EXPECT_EQ(TestHold::PointOfPhase(StepPhase::kForward), TestHold::Point::kForward);
  EXPECT_EQ(TestHold::PointOfPhase(StepPhase::kBackward), TestHold::Point::kBackward);
  EXPECT_EQ(TestHold::PointOfPhase(StepPhase::kAllreduce), TestHold::Point::kAllreduce);
  EXPECT_EQ(TestHold::PointOfPhase(StepPhase::kOptimizer), TestHold::Point::kOptimizer);
  EXPECT_FALSE(TestHold::PointOfPhase(StepPhase::kCheckpoint).has_value());
  EXPECT_FALSE(TestHold::PointOfPhase(StepPhase::kRecovery).has_value());
}

TEST(TestHold, ParsesItsEnvironmentVariable) {
  struct Case {
    std::string value;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"", true},
      {"step:1:5:/tmp/m", true},
      {"checkpoint:0:12:/tmp/a,eval:2:8:/tmp/b,rejoin:0:5:/tmp/c", true},
      {"connect:2:5:/tmp/a", true},
      {"published:2:0:/tmp/a,sync:0:5:/tmp/b", true},
      {"data:0:1:/tmp/a,forward:1:2:/tmp/b,backward:2:3:/tmp/c", true},
      {"allreduce:3:4:/tmp/d,optimizer:0:5:/tmp/e", true},
      {"reduce:1:5:/tmp/m", false},
      {"step:1:5", false},
      {"jump:1:5:/tmp/m", false},
      {"step:-1:5:/tmp/m", false},
      {"step:x:5:/tmp/m", false},
      {"step:1:y:/tmp/m", false},
      {"step:1:5:", false},
  };
  for (const Case& c : cases) {
    auto hold = TestHold::FromEnv({{"DDP_TEST_HOLD", c.value}});
    EXPECT_EQ(hold.ok(), c.ok) << c.value << ": " << hold.status();
    if (!c.ok) {
      EXPECT_NE(hold.status().message().find("DDP_TEST_HOLD"), std::string::npos);
    }
  }
  EXPECT_TRUE(TestHold::FromEnv({})->empty());
  EXPECT_FALSE(TestHold().At(TestHold::Point::kStep, 0, 0)) << "the default never holds";
}

TEST(TestHold, StopsTheProcessOnceAtItsPoint) {
  char dir[] = "/tmp/ddp-test-hold-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string marker = std::string(dir) + "/held";
  auto hold = TestHold::FromEnv({{"DDP_TEST_HOLD", "step:1:5:" + marker}});
  ASSERT_TRUE(hold.ok()) << hold.status();
  EXPECT_FALSE(hold->At(TestHold::Point::kStep, 0, 5)) << "another rank";
  EXPECT_FALSE(hold->At(TestHold::Point::kStep, 1, 4)) << "another step";
  EXPECT_FALSE(hold->At(TestHold::Point::kEval, 1, 5)) << "another point";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(hold->At(TestHold::Point::kStep, 1, 5) ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  EXPECT_TRUE(WIFSTOPPED(status)) << "the child stopped itself";
  kill(child, SIGCONT);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "it held, then went on";
  std::ifstream written(marker);
  pid_t named = 0;
  EXPECT_TRUE(written >> named) << "the marker holds the held pid";
  EXPECT_EQ(named, child);
  EXPECT_FALSE(hold->At(TestHold::Point::kStep, 1, 5))
      << "the marker exists: a replacement goes on";
  std::remove(marker.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace ddp
