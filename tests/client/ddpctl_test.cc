#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/run_shell.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

using ::ddp::testing::RunShell;

std::string Ddpctl() {
  const char* bin = std::getenv("DDP_BIN_DIR");
  return bin == nullptr ? "" : std::string(bin) + "/ddpctl";
}

TEST(DdpctlTest, HelpExitsZero) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell(Ddpctl() + " --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("status"));
  EXPECT_EQ(RunShell(Ddpctl() + " status --help", &out), 0);
  EXPECT_THAT(out, HasSubstr("--json"));
}

TEST(DdpctlTest, UnknownFlagIsOneLineAndNonZero) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell(Ddpctl() + " status --bogus", &out), 2);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_THAT(out, HasSubstr("ddpctl:"));
}

TEST(DdpctlTest, NoJobGivenIsAClearError) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  EXPECT_EQ(RunShell("env -u DDP_DIST_FILE " + Ddpctl() + " status", &out), 1);
  EXPECT_THAT(out, HasSubstr("--dist-file"));
}

TEST(DdpctlTest, UnreachableCoordinatorFailsWithinSeconds) {
  if (Ddpctl().empty()) GTEST_SKIP() << "DDP_BIN_DIR is unset";
  std::string out;
  absl::Time start = absl::Now();
  EXPECT_EQ(RunShell(Ddpctl() + " --timeout 2 --address 127.0.0.1:1 --token x status", &out), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_THAT(out, HasSubstr("unreachable"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace ddp
