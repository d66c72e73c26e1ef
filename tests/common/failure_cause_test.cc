#include "common/failure_cause.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

// The names are a contract (status JSON `failure.cause`): stable, lowercase, distinct.
TEST(FailureCauseTest, StableNames) {
  const std::vector<std::pair<FailureKind, std::string>> want = {
      {FailureKind::kNone, "none"},
      {FailureKind::kSignal, "signal"},
      {FailureKind::kExitCode, "exit_code"},
      {FailureKind::kLostHeartbeat, "lost_heartbeat"},
      {FailureKind::kStall, "stall"},
      {FailureKind::kCollectiveError, "collective_error"},
      {FailureKind::kWorkerError, "worker_error"},
      {FailureKind::kRegistrationTimeout, "registration_timeout"},
      {FailureKind::kCoordinatorLost, "coordinator_lost"},
      {FailureKind::kOperatorStop, "operator_stop"},
      {FailureKind::kStragglerReplaced, "straggler_replaced"},
  };
  ASSERT_EQ(want.size(), std::size(kAllFailureKinds));
  std::set<std::string> seen;
  for (const auto& [kind, name] : want) {
    EXPECT_EQ(FailureKindName(kind), name);
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
  EXPECT_TRUE(FailureCause{}.empty());
  EXPECT_FALSE((FailureCause{3, FailureKind::kSignal, "x"}).empty());
}

}  // namespace
}  // namespace ddp
