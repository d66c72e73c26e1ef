#include "coordinator/job/checkpoint_ledger.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(CheckpointLedgerTest, CheckpointsOnlyMoveForward) {
  struct Case {
    const char* name;
    std::vector<CommittedCheckpoint> commits;
    std::vector<bool> ok;  // per commit
    int64_t want_step;     // latest step afterwards
  };
  const std::vector<Case> cases = {
      {"first", {{0, 10, 80, "/a"}}, {true}, 10},
      {"forward in epoch", {{0, 10, 80, "/a"}, {0, 20, 160, "/b"}}, {true, true}, 20},
      {"same step again", {{0, 10, 80, "/a"}, {0, 10, 80, "/a2"}}, {true, true}, 10},
      {"older step refused", {{0, 20, 160, "/b"}, {0, 10, 80, "/a"}}, {true, false}, 20},
      {"older epoch refused", {{2, 5, 40, "/b"}, {1, 50, 400, "/a"}}, {true, false}, 5},
      {"next epoch, lower step", {{1, 50, 400, "/a"}, {2, 5, 40, "/b"}}, {true, true}, 5},
  };
  for (const Case& c : cases) {
    CheckpointLedger ledger;
    EXPECT_EQ(ledger.latest(), nullptr) << c.name;
    for (size_t i = 0; i < c.commits.size(); ++i) {
      absl::Status st = ledger.Commit(c.commits[i]);
      EXPECT_EQ(st.ok(), c.ok[i]) << c.name << " commit " << i << ": " << st;
      if (!st.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(st)) << c.name;
      }
    }
    ASSERT_NE(ledger.latest(), nullptr) << c.name;
    EXPECT_EQ(ledger.latest()->step, c.want_step) << c.name;
  }
}

TEST(CheckpointLedgerTest, ConsumedOnlyForTheLatestCheckpointsEpoch) {
  CheckpointLedger ledger;
  EXPECT_FALSE(ledger.ConsumedIn(0).has_value());
  ASSERT_TRUE(ledger.Commit({3, 70, 1234, "/c"}).ok());
  EXPECT_EQ(ledger.ConsumedIn(3), 1234);
  EXPECT_FALSE(ledger.ConsumedIn(2).has_value());
  EXPECT_FALSE(ledger.ConsumedIn(4).has_value());
}

}  // namespace
}  // namespace ddp
