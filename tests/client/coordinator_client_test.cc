#include "client/coordinator_client.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "client/operator_client.h"
#include "common/dist_file.h"
#include "coordinator/job/job.h"
#include "coordinator/kv_store.h"
#include "coordinator/rpc/server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;

TEST(CoordinatorClientTest, RoundTripThroughTheGeneratedProto) {
  auto contents = NewDistFileContents("rt", 0, "", 0);
  ASSERT_TRUE(contents.ok());
  JobConfig config;
  config.job_id = "rt";
  config.nonce = contents->nonce;
  config.world_size = 1;
  Job job(config, MonotonicClock::Get());
  KvStore store;
  ServerOptions options;
  options.token = contents->token;
  auto server = CoordinatorServer::Start(options, &job, &store, MonotonicClock::Get());
  ASSERT_TRUE(server.ok()) << server.status();
  ConnectOptions o;
  o.address = (*server)->address();
  o.token = contents->token;
  auto api = ConnectToCoordinator(o);
  ASSERT_TRUE(api.ok()) << api.status();
  WorkerIdentity who;
  who.host = "me";
  who.nonce = contents->nonce;
  auto rank = (*api)->Register(who, absl::Seconds(5));
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ(rank->rank, 0);
  EXPECT_EQ(rank->world_size, 1);
  EXPECT_EQ(*(*api)->StoreAdd("x", 41), 41);
  EXPECT_EQ(*(*api)->StoreAdd("x", 1), 42);
  auto op = OperatorClient::Connect(o);
  ASSERT_TRUE(op.ok());
  auto status = (*op)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, JobState::kRunning);
  EXPECT_EQ(status->ranks.size(), 1u);
  EXPECT_EQ(status->ranks[0].host, "me");
}

TEST(CoordinatorClientTest, AbsentServerFailsWithinTheDeadlineNamingTheAddress) {
  ConnectOptions o;
  o.address = "127.0.0.1:1";
  o.token = "t";
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
