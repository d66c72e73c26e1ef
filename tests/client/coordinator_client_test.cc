#include "client/coordinator_client.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "client/operator_client.h"
#include "common/dist_file.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/rpc/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/live_coordinator.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

TEST(CoordinatorClientTest, RoundTripThroughTheGeneratedProto) {
  LiveCoordinator c("rt", /*world_size=*/1, /*max_restarts=*/0);
  ASSERT_TRUE(c.server.ok()) << c.server.status();
  ConnectOptions o = c.connect(c.contents.token);
  auto api = ConnectToCoordinator(o);
  ASSERT_TRUE(api.ok()) << api.status();
  WorkerIdentity who;
  who.host = "me";
  who.nonce = c.contents.nonce;
  auto rank = (*api)->Register(who, absl::Seconds(5));
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ(rank->rank, 0);
  EXPECT_EQ(rank->world_size, 1);
  EXPECT_EQ(*(*api)->StoreAdd("x", 41), 41);
  EXPECT_EQ(*(*api)->StoreAdd("x", 1), 42);
  o.token = c.contents.view_token;
  auto op = OperatorClient::Connect(o);
  ASSERT_TRUE(op.ok()) << op.status();
  auto status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, JobState::kRunning);
  EXPECT_EQ(status->ranks.size(), 1u);
  EXPECT_EQ(status->ranks[0].host, "me");
}

// In-job recovery over the wire: a launcher's ReportLost gets RESPAWN, the survivor's Rejoin and
// the replacement's Register both answer with the next membership generation and its store prefix.
TEST(CoordinatorClientTest, ReportLostRejoinAndReplacementOverTheWire) {
  LiveCoordinator c("rec", /*world_size=*/2, /*max_restarts=*/1);
  ASSERT_TRUE(c.server.ok()) << c.server.status();
  const DistFileContents* contents = &c.contents;
  ConnectOptions o = c.connect(contents->view_token);
  // Rejoin is a worker's call: the view token is refused on the call's headers.
  auto viewer = ConnectToCoordinator(o);
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  auto refused = (*viewer)->Rejoin(RejoinRequest{}, absl::Seconds(5));
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  o.token = contents->token;
  auto survivor = ConnectToCoordinator(o);
  auto victim = ConnectToCoordinator(o);
  auto launcher = ConnectToCoordinator(o);
  auto replacement = ConnectToCoordinator(o);
  ASSERT_TRUE(survivor.ok() && victim.ok() && launcher.ok() && replacement.ok());
  auto who = [&](int local_rank, int pid) {
    WorkerIdentity w;
    w.host = "me";
    w.local_rank = local_rank;
    w.local_world_size = 2;
    w.pid = pid;
    w.nonce = contents->nonce;
    return w;
  };
  absl::StatusOr<RankAssignment> first = absl::UnknownError("not run");
  std::thread t([&] { first = (*survivor)->Register(who(0, 100), absl::Seconds(10)); });
  auto second = (*victim)->Register(who(1, 101), absl::Seconds(10));
  t.join();
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(first->membership_generation, 0);

  auto decision = (*launcher)->ReportLost(LostWorker{0, 1, 101, "killed by signal 9", 9, 0});
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->action, LostAction::kRespawn);
  EXPECT_THAT(decision->description, HasSubstr("rank 1"));

  absl::StatusOr<RankAssignment> rejoined = absl::UnknownError("not run");
  std::thread r([&] {
    RejoinRequest request;
    request.membership_generation = 0;
    request.committed_step = 7;
    request.reason = "peer reset";
    rejoined = (*survivor)->Rejoin(request, absl::Seconds(10));
  });
  auto replaced = (*replacement)->Register(who(1, 102), absl::Seconds(10));
  r.join();
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(rejoined->membership_generation, 1);
  EXPECT_EQ(replaced->membership_generation, 1);
  EXPECT_EQ(replaced->rank, 1);
  EXPECT_EQ(rejoined->store_prefix, replaced->store_prefix);
  EXPECT_NE(rejoined->store_prefix, first->store_prefix);
  EXPECT_TRUE(replaced->state_from_peers);
  EXPECT_EQ(replaced->restarts, 1);

  // A spare node stands by over the wire (the client fills in its pid and the nonce); one whose
  // node id holds ranks is refused.
  SpareReport spare;
  spare.node_rank = 1;
  spare.local_world_size = 2;
  spare.host = "spare-host";
  auto standing = (*launcher)->StandBy(spare);
  ASSERT_TRUE(standing.ok()) << standing.status();
  EXPECT_EQ(standing->action, SpareAction::kWait);
  spare.node_rank = 0;
  EXPECT_TRUE(absl::IsInvalidArgument((*launcher)->StandBy(spare).status()));

  // Restarts exhausted: the next loss is answered STOP and fails the job naming both ranks.
  decision = (*launcher)->ReportLost(LostWorker{0, 1, 102, "killed by signal 9", 9, 0});
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->action, LostAction::kStop);
  o.token = contents->view_token;
  auto op = OperatorClient::Connect(o);
  ASSERT_TRUE(op.ok());
  auto status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, JobState::kFailed);
  EXPECT_EQ(status->restarts, 1);
  EXPECT_EQ(status->lost_ranks.size(), 2u);
  EXPECT_EQ(status->spare_nodes, 1);
  spare.node_rank = 1;
  auto leave = (*launcher)->StandBy(spare);
  ASSERT_TRUE(leave.ok()) << leave.status();
  EXPECT_EQ(leave->action, SpareAction::kLeave) << "the job failed";
  EXPECT_THAT(status->failure.text, HasSubstr("restarts exhausted"));
}

TEST(CoordinatorClientTest, AbsentServerFailsWithinTheDeadlineNamingTheAddress) {
  ConnectOptions o;
  o.address = "127.0.0.1:1";
  o.token = "t";
  o.tls_cert = NewTlsIdentity()->cert_pem;
  o.rpc_timeout = absl::Seconds(1);
  // Connect says Hello (reachability and token) even without a dist_file.
  absl::Time start = absl::Now();
  auto st = OperatorClient::Connect(o);
  absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(st.status())) << st.status();
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("127.0.0.1:1 unreachable"));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST(CoordinatorClientTest, MissingDistFileFailsAfterItsTimeout) {
  ConnectOptions o;
  o.dist_file = ::testing::TempDir() + "/no_such_dist_file";
  o.dist_file_timeout = absl::Milliseconds(200);
  auto api = ConnectToCoordinator(o);
  EXPECT_TRUE(absl::IsNotFound(api.status())) << api.status();
  EXPECT_THAT(std::string(api.status().message()), HasSubstr("gave up after"));
}

TEST(CoordinatorClientTest, NeedsAJob) {
  EXPECT_TRUE(absl::IsInvalidArgument(ConnectToCoordinator({}).status()));
  ConnectOptions o;
  o.address = "127.0.0.1:1";
  EXPECT_TRUE(absl::IsInvalidArgument(ConnectToCoordinator(o).status()));  // no token
}

}  // namespace
}  // namespace ddp
