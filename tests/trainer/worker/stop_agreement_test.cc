// The stop agreement: a rank's own code (a lost coordinator wins over a stop), and the MAX
// allreduce that gives every rank the highest code of any rank, with three ranks as threads of
// one process on a Gloo group over loopback.
#include "trainer/worker/stop_agreement.h"

#include <thread>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/ddp/process_group.h"

namespace ddp {
namespace {

TEST(StopAgreement, ALostCoordinatorWinsOverAStopRequest) {
  struct Case {
    bool stop_requested, coordinator_lost;
    StopCode want;
  };
  for (const Case& c : {Case{false, false, StopCode::kNone}, Case{true, false, StopCode::kStop},
                        Case{false, true, StopCode::kCoordinatorLost},
                        Case{true, true, StopCode::kCoordinatorLost}}) {
    EXPECT_EQ(LocalStopCode(c.stop_requested, c.coordinator_lost), c.want)
        << c.stop_requested << " " << c.coordinator_lost;
  }
  EXPECT_LT(static_cast<int>(StopCode::kNone), static_cast<int>(StopCode::kStop));
  EXPECT_LT(static_cast<int>(StopCode::kStop), static_cast<int>(StopCode::kCoordinatorLost));
}

// Each row: the code of every rank, and what all of them must agree on.
TEST(StopAgreement, EveryRankGetsTheHighestCodeOfAnyRank) {
  constexpr int kWorld = 3;
  struct Case {
    std::vector<StopCode> local;
    StopCode want;
  };
  const std::vector<Case> cases = {
      {{StopCode::kNone, StopCode::kNone, StopCode::kNone}, StopCode::kNone},
      {{StopCode::kNone, StopCode::kStop, StopCode::kNone}, StopCode::kStop},
      {{StopCode::kNone, StopCode::kNone, StopCode::kCoordinatorLost}, StopCode::kCoordinatorLost},
      {{StopCode::kStop, StopCode::kCoordinatorLost, StopCode::kStop}, StopCode::kCoordinatorLost},
  };
  auto store = c10::make_intrusive<c10d::HashStore>();
  ProcessGroupOptions options;
  options.backend = BackendKind::kGloo;
  options.gloo_hostname = "127.0.0.1";
  options.gloo_threads = 1;
  options.timeout = std::chrono::seconds(60);
  std::vector<std::vector<StopCode>> agreed(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      auto pg = CreateProcessGroup(store, rank, kWorld, options);
      ASSERT_TRUE(pg.ok()) << pg.status();
      for (const Case& c : cases) {
        agreed[rank].push_back(AgreeStopCode(**pg, c.local[rank], at::kCPU, "test"));
      }
      EXPECT_TRUE(ShutdownProcessGroup(**pg).ok());
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(agreed[rank].size(), cases.size()) << "rank " << rank;
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(agreed[rank][i], cases[i].want)
          << "rank " << rank << ", case " << i << ": " << StopCodeName(agreed[rank][i]);
    }
  }
}

}  // namespace
}  // namespace ddp
