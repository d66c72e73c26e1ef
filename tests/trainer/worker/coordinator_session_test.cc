// CoordinatorSession against an in-memory coordinator: its rank and log prefix, heartbeats from
// its reporter, outcomes reported as given, the first shard its registration answered (used for
// the same request only, once), the c10d store it hands to process groups (keys
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
  // The next generation: the survivor renumbered in a smaller world.
  absl::StatusOr<RankAssignment> Rejoin(const RejoinRequest& request, absl::Duration) override {
    RankAssignment next;
    next.rank = 1;
    next.world_size = 3;
    next.membership_generation = request.membership_generation + 1;
    return next;
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

ShardRequest FreshEpoch0() {
  ShardRequest q;
  q.epoch = 0;
  q.dataset_size = 1000;
  q.seed = 7;
  return q;
}

// A session whose registration asked `asked` and was answered `answer`.
std::unique_ptr<CoordinatorSession> Registered(
    std::optional<ShardRequest> asked, std::optional<absl::StatusOr<ShardAssignment>> answer) {
  RankAssignment rank;
  rank.rank = 2;
  rank.world_size = 4;
  rank.first_shard = std::move(answer);
  return std::make_unique<CoordinatorSession>(std::make_unique<RecordingCoordinator>(), rank,
                                              ProgressReporterOptions{}, std::move(asked));
}

ShardAssignment Granted() {
  ShardAssignment a;
  a.dataset_size = 1000;
  a.seed = 7;
  a.world_size = 4;
  a.rank = 2;
  a.consumed_world_size = 4;
  return a;
}

TEST(CoordinatorSession, TheRegistrationsShardAnswersTheSameRequestOnce) {
  auto s = Registered(FreshEpoch0(), Granted());
  const std::optional<ShardAssignment> first = s->TakeFirstShard(FreshEpoch0());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 2);
  EXPECT_EQ(first->world_size, 4);
  EXPECT_EQ(first->seed, 7);
  EXPECT_FALSE(s->TakeFirstShard(FreshEpoch0()).has_value());  // the next epoch's call asks
}

TEST(CoordinatorSession, AnotherFirstRequestAsksTheCoordinator) {
  // A worker that resumed after all (its position came from a checkpoint or its peers) asks for
  // another epoch or position: the answer to the guess is dropped, never used later.
  for (const auto& change : std::vector<void (*)(ShardRequest*)>{
           [](ShardRequest* q) { q->epoch = 3; },
           [](ShardRequest* q) { q->resume_consumed = 96; },
           [](ShardRequest* q) { q->resume_world_size = 2; },
           [](ShardRequest* q) { q->seed = 8; },
           [](ShardRequest* q) { q->dataset_size = 999; },
           [](ShardRequest* q) { q->shuffle = false; },
           [](ShardRequest* q) { q->drop_last = true; },
       }) {
    auto s = Registered(FreshEpoch0(), Granted());
    ShardRequest other = FreshEpoch0();
    change(&other);
    EXPECT_FALSE(s->TakeFirstShard(other).has_value());
    EXPECT_FALSE(s->TakeFirstShard(FreshEpoch0()).has_value());
  }
}

TEST(CoordinatorSession, NoShardWhenNotAskedRefusedOrAfterARejoin) {
  EXPECT_FALSE(Registered(std::nullopt, Granted())->TakeFirstShard(FreshEpoch0()).has_value());
  EXPECT_FALSE(Registered(FreshEpoch0(), std::nullopt)->TakeFirstShard(FreshEpoch0()).has_value());
  EXPECT_FALSE(Registered(FreshEpoch0(), absl::InvalidArgumentError("dataset_size"))
                   ->TakeFirstShard(FreshEpoch0())
                   .has_value());
  auto s = Registered(FreshEpoch0(), Granted());
  ASSERT_TRUE(s->Rejoin(0, "a peer was lost", absl::Seconds(5)).ok());
  EXPECT_FALSE(s->TakeFirstShard(FreshEpoch0()).has_value());  // its rank may have changed
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
