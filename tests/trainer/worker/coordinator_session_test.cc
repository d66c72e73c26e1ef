// CoordinatorSession against an in-memory coordinator: its rank and log prefix, heartbeats from
// its reporter, outcomes reported as given, the c10d store it hands to process groups (keys
// under each build's prefix, typed timeouts), and a clear error when no coordinator is found.
#include "trainer/worker/coordinator_session.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/trainer/ddp/fake_coordinator.h"
#include "trainer/ddp/dist_errors.h"

namespace ddp {
namespace {

class RecordingCoordinator : public testing::FakeCoordinator {
 public:
  absl::StatusOr<HeartbeatReply> Heartbeat(const ProgressReport& report) override {
    heartbeats.fetch_add(1);
    last_step.store(report.step);
    return HeartbeatReply{};
  }
  absl::Status ReportDone(const absl::Status& outcome) override {
    absl::MutexLock lock(&mu);
    outcomes.push_back(outcome);
    return absl::OkStatus();
  }
  std::atomic<int> heartbeats{0};
  std::atomic<int64_t> last_step{-1};
  absl::Mutex mu;
  std::vector<absl::Status> outcomes ABSL_GUARDED_BY(mu);
};

struct Session {
  Session() {
    auto api = std::make_unique<RecordingCoordinator>();
    fake = api.get();
    RankAssignment rank;
    rank.rank = 2;
    rank.world_size = 4;
    session = std::make_unique<CoordinatorSession>(std::move(api), rank, ProgressReporterOptions{});
  }
  RecordingCoordinator* fake;  // owned by the session
  std::unique_ptr<CoordinatorSession> session;
};

TEST(CoordinatorSession, KnowsItsRankAndHeartbeatsProgress) {
  Session s;
  EXPECT_EQ(s.session->log_prefix(), "[rank 2] ");
  EXPECT_EQ(s.session->rank().world_size, 4);
  ProgressReport r;
  r.step = 17;
  s.session->reporter().Update(r);
  s.session->reporter().Flush();
  EXPECT_GE(s.fake->heartbeats.load(), 1);
  EXPECT_EQ(s.fake->last_step.load(), 17);
}

TEST(CoordinatorSession, ReportsTheOutcomeAsGiven) {
  Session s;
  s.session->ReportOutcome(absl::UnavailableError("allreduce failed"));
  s.session->ReportOutcome(absl::OkStatus());
  absl::MutexLock lock(&s.fake->mu);
  ASSERT_EQ(s.fake->outcomes.size(), 2u);
  EXPECT_EQ(s.fake->outcomes[0], absl::UnavailableError("allreduce failed"));
  EXPECT_TRUE(s.fake->outcomes[1].ok());
}

TEST(CoordinatorSession, StoreKeepsEachBuildUnderItsPrefixAndTimesOutTyped) {
  Session s;
  auto store = s.session->Store(std::chrono::milliseconds(200));
  auto gen3 = c10::make_intrusive<c10d::PrefixStore>("gen3", store);
  gen3->set("rank_0", std::vector<uint8_t>{1, 2});
  EXPECT_TRUE(*s.fake->StoreCheck({"gen3/rank_0"}));
  EXPECT_FALSE(*s.fake->StoreCheck({"rank_0"}));
  auto gen4 = c10::make_intrusive<c10d::PrefixStore>("gen4", store);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(gen4->get("rank_0"), StoreTimeoutError);  // gen4 never sees gen3's keys
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(CoordinatorSession, OpenWithoutACoordinatorFailsNamingItsLog) {
  CoordinatorSession::Options c;
  c.registration_timeout = absl::Seconds(1);
  WorkerPlacement p;
  p.dist_file = "/nonexistent-dir/dist_file.test";
  p.job_id = "test";
  p.coordinator_log = "dist_file.test.coordinator.log";
  const auto start = std::chrono::steady_clock::now();
  auto session = CoordinatorSession::Open(c, p);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("(coordinator log: dist_file.test.coordinator.log)"),
            std::string::npos)
      << session.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace ddp
