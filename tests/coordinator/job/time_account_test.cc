// TimeAccount: wall time charged to what the job was doing, frozen once it ends.
#include "coordinator/job/time_account.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(TimeAccount, ChargesEachStretchToWhatTheJobWasDoing) {
  const absl::Time t0 = absl::FromUnixSeconds(100);
  TimeAccount a(t0);
  a.Charge(t0 + absl::Seconds(5), TimeUseKind::kTraining);     // 5 s start-up
  a.Charge(t0 + absl::Seconds(85), TimeUseKind::kCheckpoint);  // 80 s training
  a.Charge(t0 + absl::Seconds(87), TimeUseKind::kTraining);    // 2 s checkpoint
  a.Charge(t0 + absl::Seconds(90), TimeUseKind::kRecovery);    // 3 s training
  a.Charge(t0 + absl::Seconds(96), TimeUseKind::kEvaluation);  // 6 s recovery
  a.Charge(t0 + absl::Seconds(97), TimeUseKind::kStall);       // 1 s evaluation
  a.Charge(t0 + absl::Seconds(98), TimeUseKind::kOther);       // 1 s stall
  TimeUse u = a.Read(t0 + absl::Seconds(100));                 // 2 s other, so far
  EXPECT_DOUBLE_EQ(u.wall, 100);
  EXPECT_DOUBLE_EQ(u.startup, 5);
  EXPECT_DOUBLE_EQ(u.training, 83);
  EXPECT_DOUBLE_EQ(u.checkpoint, 2);
  EXPECT_DOUBLE_EQ(u.recovery, 6);
  EXPECT_DOUBLE_EQ(u.evaluation, 1);
  EXPECT_DOUBLE_EQ(u.stall, 1);
  EXPECT_DOUBLE_EQ(u.other, 2);
  EXPECT_DOUBLE_EQ(u.ettr(), 0.83);
  a.Stop(t0 + absl::Seconds(100));
  a.Charge(t0 + absl::Seconds(200), TimeUseKind::kTraining);
  EXPECT_DOUBLE_EQ(a.Read(t0 + absl::Seconds(300)).wall, 100) << "frozen once ended";
  EXPECT_DOUBLE_EQ(TimeAccount(t0).Read(t0).ettr(), -1);
}

}  // namespace
}  // namespace ddp
