#include "trainer/launcher/coordinator_restarts.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace ddp {
namespace {

ExitStatus Exited(int code) { return ExitStatus(code << 8); }
ExitStatus Killed(int sig) { return ExitStatus(sig); }

TEST(CoordinatorRestarts, RestartsAfterSigkillUpToTheLimit) {
  CoordinatorRestarts r(2);
  EXPECT_TRUE(r.OnExit(Killed(SIGKILL)).restart);
  EXPECT_TRUE(r.OnExit(Killed(SIGKILL)).restart);  // a restarted one killed again
  const CoordinatorRestarts::Decision d = r.OnExit(Killed(SIGKILL));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why.find("--coordinator-restarts 2 used"), std::string::npos) << d.why;
  EXPECT_EQ(r.used(), 2);
}

TEST(CoordinatorRestarts, AFirstCoordinatorsErrorExitIsRestarted) {
  CoordinatorRestarts r(3);
  EXPECT_TRUE(r.OnExit(Exited(1)).restart);
}

TEST(CoordinatorRestarts, NeverAfterExitZero) {
  CoordinatorRestarts r(3);
  EXPECT_FALSE(r.OnExit(Exited(0)).restart);
  EXPECT_TRUE(r.OnExit(Killed(SIGSEGV)).restart);
  EXPECT_FALSE(r.OnExit(Exited(0)).restart);  // a restarted one that ended the job
}

TEST(CoordinatorRestarts, NoneAfterARestartedOnesOwnErrorExit) {
  CoordinatorRestarts r(3);
  EXPECT_TRUE(r.OnExit(Killed(SIGKILL)).restart);
  const CoordinatorRestarts::Decision d = r.OnExit(Exited(1));  // e.g. it refused its journal
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why.find("by itself"), std::string::npos) << d.why;
  EXPECT_EQ(r.used(), 1);
}

TEST(CoordinatorRestarts, ZeroDisablesRestarts) {
  CoordinatorRestarts r(0);
  const CoordinatorRestarts::Decision d = r.OnExit(Killed(SIGKILL));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why.find("--coordinator-restarts 0"), std::string::npos) << d.why;
}

}  // namespace
}  // namespace ddp
